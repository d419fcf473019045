// A worker process SIGKILLed in the middle of a job: BullMQ recovers the job (same id) in another process, and the
// job's lock is held through the crash and released when the recovered run completes.
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { lockKey, type LockType } from '../lib/index.js';
import { startApp, type TestApp } from './support/app.js';
import { killFixturesAndWait, spawnFixture } from './support/fixtures.js';
import { digestOf, owners, queuedKey } from './support/locks.js';
import { deleteNamespaces, lockKeys, openQueueEvents, redisClient, redisOptions, uniqueName } from './support/redis.js';

// Both suites: the fixtures' probes, the app and its QueueEvents of the test, cleaned after each.
const redis = redisClient();
const blocking = new Redis(redisOptions());
let app: TestApp | undefined;
let events: QueueEvents | undefined;
const probes: string[] = [];

afterEach(async () => {
  // A worker may still be running the last job: wait until it is gone before deleting the keys.
  await killFixturesAndWait();
  await events?.close();
  events = undefined;
  await app?.close();
  await deleteNamespaces(redis, { prefixes: probes.splice(0) });
});
afterAll(async () => {
  await redis.quit();
  await blocking.quit();
});

describe('a worker process killed mid-job', () => {
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
        expect(await owners(redis, key)).toEqual([jobId]);
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
    // Two worker processes boot one after the other, and BullMQ's stalled check must find the first one's job: on a
    // loaded machine (a review's helpers beside the suite) this took past the default 30 s once.
    60_000,
  );
});

// Found by a hostile review (session 27): a worker whose event loop stalled past BullMQ's job lock (CPU-bound work, a
// long GC, a paused VM) lost the job to BullMQ's stalled-job check; another worker ran it again. When the stalled
// worker woke, its handler returned and it gave the job's lock back — the lock the job's new run held (the owner is the
// job, so the new run had re-entered it). A duplicate of the digest was then admitted and ran beside that run. Now a
// run-time lock is given back only by the take that marked its lease, and a deduplication key only while the worker still
// holds BullMQ's job lock: the stalled worker leaves both to the new run, as BullMQ refuses its record of the end.
describe('a worker process that stalls past its job lock', () => {
  it.each<[string, LockType, 'enqueue' | 'runtime' | 'slot-set', Record<string, string>]>([
    ['while_executing', 'while_executing', 'runtime', { RUNTIME_LEASE: '20000' }],
    ['until_executed with a lockTtl', 'until_executed', 'enqueue', { LOCK_TTL: '60000' }],
    // Session 46: a general-path slot (lockLimit 2) was given back by the stalled run's end, and two more jobs of the
    // digest were admitted while the recovered run held none.
    ['until_executed with lockLimit 2 (general path)', 'until_executed', 'slot-set', { LOCK_LIMIT: '2' }],
  ])(
    '%s: the stalled worker leaves the lock to the job’s new run; a duplicate is still refused',
    async (_label, lock, kind, extra) => {
      const queue = uniqueName('stall');
      const prefix = uniqueName('ujstall');
      const probe = uniqueName('probe');
      probes.push(probe);
      const lockTtl = extra.LOCK_TTL === undefined ? {} : { lockTtl: Number(extra.LOCK_TTL) };
      const lockLimit = extra.LOCK_LIMIT === undefined ? {} : { lockLimit: Number(extra.LOCK_LIMIT) };
      app = await startApp({
        queue,
        module: { prefix, jobs: [{ queue, lock, lockArgs: (d: { id: string }) => d.id, ...lockTtl, ...lockLimit }] },
      });
      const key =
        kind === 'slot-set'
          ? queuedKey(prefix, digestOf(app, 'settle', { id: 'evt_1' }))
          : lockKey({ queue, name: 'settle', lockArgs: 'evt_1', prefix, kind });
      const holders = async () => (kind === 'enqueue' ? [await redis.get(key)] : await owners(redis, key));
      const fixtureEnv = { QUEUE: queue, PREFIX: prefix, PROBE: probe, LOCK: lock, ...extra };

      // Worker A takes the job and blocks its event loop until told: its BullMQ job lock (1 s) lapses.
      const wake = join(mkdtempSync(join(tmpdir(), 'stall-')), 'wake');
      const a = spawnFixture('crash-worker', { ...fixtureEnv, LABEL: 'A', STALL_UNTIL: wake });
      await a.waitFor((m) => m.ready === true);
      const first = await app.service.enqueue(app.queue, 'settle', { id: 'evt_1' });
      if (first.status !== 'enqueued') throw new Error('not enqueued');
      const jobId = first.job.id!;
      expect(await blocking.blpop(`${probe}:started`, 20)).toEqual([`${probe}:started`, `A:${jobId}`]);
      // Worker B's stalled-job check hands the job over; B runs it (and holds it: HANG).
      const b = spawnFixture('crash-worker', { ...fixtureEnv, LABEL: 'B', HANG: '1' });
      await b.waitFor((m) => m.ready === true);
      expect(await blocking.blpop(`${probe}:started`, 20)).toEqual([`${probe}:started`, `B:${jobId}`]);
      expect(await holders()).toEqual([jobId]);

      // A wakes: its handler returns, its release is sent, then BullMQ refuses its record of the job's end.
      writeFileSync(wake, '');
      await a.waitFor((m) => typeof m.workerError === 'string' && m.workerError.includes(jobId));
      expect(await holders()).toEqual([jobId]); // still the job's: its run on B holds it
      if (kind === 'enqueue') {
        await expect(app.service.enqueue(app.queue, 'settle', { id: 'evt_1' })).resolves.toMatchObject({
          status: 'duplicate',
          existingJobId: jobId,
        });
      } else if (kind === 'slot-set') {
        // One more job of the digest fits beside the run on B (lockLimit 2; delayed, so that A does not run it), not two.
        const second = await app.service.enqueue(app.queue, 'settle', { id: 'evt_1' }, { delay: 60_000 });
        expect(second.status).toBe('enqueued');
        await expect(app.service.enqueue(app.queue, 'settle', { id: 'evt_1' })).resolves.toMatchObject({
          status: 'duplicate',
        });
      } else {
        // A duplicate job reaches worker A, which meets the lock the job's run on B holds (onConflict 'log': the
        // duplicate ends without running).
        events = await openQueueEvents(queue);
        await events.waitUntilReady();
        const duplicate = await app.queue.add('settle', { id: 'evt_1' });
        await duplicate.waitUntilFinished(events);
        expect(await blocking.lrange(`${probe}:started`, 0, -1)).toEqual([]); // it never started
        expect(await holders()).toEqual([jobId]);
      }
    },
    60_000,
  );
});
