// A worker process SIGKILLed in the middle of a job: BullMQ recovers the job (same id) in another process, and the
// job's lock is held through the crash and released when the recovered run completes.
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { type QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { lockKey, type LockType } from '../lib/index.js';
import { startApp, type TestApp } from './support/app.js';
import { killFixturesAndWait, spawnFixture } from './support/fixtures.js';
import { deleteNamespaces, lockKeys, openQueueEvents, redisClient, redisOptions, uniqueName } from './support/redis.js';

describe('a worker process killed mid-job', () => {
  const redis = redisClient();
  const blocking = new Redis(redisOptions());
  let app: TestApp | undefined;
  let events: QueueEvents | undefined;
  const probes: string[] = [];

  afterEach(async () => {
    // Worker B may still be running the last job: wait until it is gone before deleting the keys.
    await killFixturesAndWait();
    await events?.close();
    await app?.close();
    await deleteNamespaces(redis, { prefixes: probes.splice(0) });
  });
  afterAll(async () => {
    await redis.quit();
    await blocking.quit();
  });

  it.each<[LockType, string]>([
    ['until_executed', 'enqueue'],
    ['while_executing', 'runtime'],
  ])(
    '%s: the lock survives the crash and the recovered job (same id) completes and releases it',
    async (lock, kind) => {
      const queue = uniqueName('crash');
      const prefix = uniqueName('ujcrash');
      const probe = uniqueName('probe');
      probes.push(probe);
      app = await startApp({
        queue,
        module: { prefix, jobs: [{ queue, lock, lockArgs: (d: { id: string }) => d.id }] },
      });
      events = await openQueueEvents(queue);
      await events.waitUntilReady();
      const key = lockKey({ queue, name: 'settle', lockArgs: 'evt_1', prefix, kind: kind as 'enqueue' | 'runtime' });
      const fixtureEnv = { QUEUE: queue, PREFIX: prefix, PROBE: probe, LOCK: lock };

      const first = await app.service.enqueue(app.queue, 'settle', { id: 'evt_1' });
      if (first.status !== 'enqueued') throw new Error('not enqueued');
      const jobId = first.job.id!;

      // Worker A takes the job and hangs in the handler; then it is SIGKILLed.
      const a = spawnFixture('crash-worker', { ...fixtureEnv, LABEL: 'A', HANG: '1' });
      await a.waitFor((m) => m.ready === true);
      expect(await blocking.blpop(`${probe}:started`, 20)).toEqual([`${probe}:started`, `A:${jobId}`]);
      a.child.kill('SIGKILL');
      await a.exited;

      // The crashed run still holds the lock, owned by the job.
      expect(await lockKeys(redis, prefix, queue)).toEqual([key]);
      if (kind === 'enqueue') {
        expect(await redis.get(key)).toBe(jobId);
        await expect(app.service.enqueue(app.queue, 'settle', { id: 'evt_1' })).resolves.toMatchObject({
          status: 'duplicate',
          existingJobId: jobId,
        });
      } else {
        expect(await redis.zrange(key, '0', '-1')).toEqual([jobId]);
      }

      // Worker B recovers the stalled job (same id) and runs it to completion.
      const b = spawnFixture('crash-worker', { ...fixtureEnv, LABEL: 'B' });
      await b.waitFor((m) => m.ready === true);
      expect(await blocking.blpop(`${probe}:started`, 20)).toEqual([`${probe}:started`, `B:${jobId}`]);
      await expect(first.job.waitUntilFinished(events)).resolves.toBe('B');
      const recovered = await app.queue.getJob(jobId);
      expect(recovered?.stalledCounter).toBe(1);
      expect(await lockKeys(redis, prefix, queue)).toEqual([]);

      // The digest is free again: a new delivery is a new job.
      const again = await app.service.enqueue(app.queue, 'settle', { id: 'evt_1' });
      expect(again.status).toBe('enqueued');
    },
  );
});
