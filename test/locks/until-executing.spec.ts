// until_executing: the enqueue lock lives from enqueue until the job starts. What it shares with other lock types
// (enqueue, retry, failure, delay) is in every-lock.spec.ts.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { hold, holdFirstRun } from '../support/gates.js';
import { byId, dedupKey, digestOf, enqueuedJob } from '../support/locks.js';
import { queueEvent } from '../support/wait.js';
import { takeWithCrashingWorker, type TestJob } from './helpers.js';

const unique: UniqueJobOptions = { lock: 'until_executing', lockArgs: byId };

describe('until_executing', () => {
  const { redis, start, keysOf, onCleanup } = useApps('ue', { unique });
  const keyOf = (a: TestApp, id: string) => dedupKey(a.queue.name, digestOf(a, 'sync', { id }));

  it('releases the lock when the job starts: a duplicate while it runs is enqueued (and locked) and runs after it', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({
      handler,
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    expect(await keysOf(a)).toEqual([]);

    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    const key = keyOf(a, 'u1');
    expect(await redis.get(key)).toBe(second.id);
    // One queued job per digest: a third one is a duplicate of the queued second, not of the running first.
    const third = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 });
    expect(third).toMatchObject({ status: 'duplicate', existingJobId: second.id });

    gate.resolve();
    await expect(a.finished(first)).resolves.toBe(1);
    await expect(a.finished(second)).resolves.toBe(2);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, second.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a failed job whose lock a duplicate took while it ran is not retried: the duplicate runs instead', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      handler: async (job: TestJob) => {
        if (job.data.n === 1) {
          started.resolve();
          await gate.promise;
          throw new Error('transient');
        }
        return job.data.n;
      },
      paused: false,
      worker: { concurrency: 1 },
    });
    const first = enqueuedJob(
      await a.service.enqueue(
        a.queue,
        'sync',
        { id: 'u1', n: 1 },
        { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      ),
    );
    await started.promise;
    // The first released its lock at start: a duplicate is enqueued (and locked) while it runs.
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    gate.resolve();
    // It would wait for its retry beside the second: at most one queued job per digest, so BullMQ fails it for good.
    await expect(a.finished(first)).rejects.toThrow(/not retried: job .* of the same digest .* holds its lock/);
    expect((await a.queue.getJob(first.id!))!.attemptsMade).toBe(1);
    await expect(a.finished(second)).resolves.toBe(2);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a job taken by a crashed worker keeps its lock until the stalled-job recovery runs it', async () => {
    const a = await start({ paused: true, worker: { stalledInterval: 300 } });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const key = keyOf(a, 'u1');
    const crashed = await takeWithCrashingWorker(a.queue.name);
    onCleanup(crashed.close);
    expect(crashed.job.id).toBe(first.id);
    expect(await a.queue.getJobState(first.id!)).toBe('active');
    // The crashed worker never ran the handler, so the lock was never released.
    expect(await redis.get(key)).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });

    const stalled = queueEvent(a.queueEvents, 'stalled', first.id!);
    a.start();
    await stalled;
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
  });

  it('with lockTtl, the lock of a delayed job lives lockTtl past its run time', async () => {
    const a = await start({ unique: { ...unique, lockTtl: 5_000 }, paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 10_000 }));
    const key = keyOf(a, 'u1');
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(13_000);
    expect(ttl).toBeLessThanOrEqual(15_000);
    await first.remove();
    expect(await keysOf(a)).toEqual([]);
  });
});
