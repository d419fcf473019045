// until_expired: the enqueue lock is only ever ended by its TTL (lockTtl past the run time). It lives in the library's
// own key (a sorted set of holders), not in BullMQ's deduplication key, which BullMQ deletes with the job. What it
// shares with other lock types is in every-lock.spec.ts.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, enqueuedJob, expiringKey, owners } from '../support/locks.js';
import { queueEvent, waitFor } from '../support/wait.js';
import { takeWithCrashingWorker, type TestJob } from './helpers.js';

const withTtl = (lockTtl: number): UniqueJobOptions => ({ lock: 'until_expired', lockArgs: byId, lockTtl });

describe('until_expired', () => {
  const { redis, start, keysOf, onCleanup } = useApps('uex');
  const keyOf = (a: TestApp, id: string) => expiringKey(a.prefix, digestOf(a, 'sync', { id }));
  const expired = (key: string) => waitFor(`${key} to expire`, async () => (await redis.exists(key)) === 0);

  it('takes a lock with TTL lockTtl at enqueue: a duplicate while the first is queued is dropped', async () => {
    const a = await start({ unique: withTtl(60_000), paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    const key = keyOf(a, 'u1');
    expect(await keysOf(a)).toEqual([key]);
    expect(await owners(redis, key)).toEqual([first.id]);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      strategy: 'log',
      existingJobId: first.id,
    });
    a.start();
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    // Not released on completion: only the TTL ends it.
    expect(await keysOf(a)).toEqual([key]);
  });

  it('after completion a duplicate is still dropped until the TTL passes, then accepted', async () => {
    const a = await start({ unique: withTtl(2_000) });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await a.finished(first);
    const key = keyOf(a, 'u1');
    expect(await keysOf(a)).toEqual([key]);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    await expired(key);
    expect(await keysOf(a)).toEqual([]);
    const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
    await a.finished(again);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, again.id]);
  });

  it('keeps the lock while a failed job waits for its retry, and after it completes', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      unique: withTtl(60_000),
      handler: async (job: TestJob) => {
        if (job.attemptsMade === 0) {
          started.resolve();
          await gate.promise;
          throw new Error('transient');
        }
        return 'retried';
      },
    });
    const first = enqueuedJob(
      await a.service.enqueue(
        a.queue,
        'sync',
        { id: 'u1' },
        { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      ),
    );
    await started.promise;
    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    const key = keyOf(a, 'u1');
    expect(await keysOf(a)).toEqual([key]);
    expect(await owners(redis, key)).toEqual([first.id]);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe('retried');
    expect(a.runs.map((job) => job.id)).toEqual([first.id, first.id]);
    expect(await owners(redis, key)).toEqual([first.id]);
    expect(await redis.pttl(key)).toBeGreaterThan(0);
  });

  it('after the final failure the lock is not held forever: it expires with its TTL', async () => {
    const a = await start({
      unique: withTtl(2_000),
      handler: async () => {
        throw new Error('always');
      },
    });
    const failing = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { attempts: 2 }));
    await expect(a.finished(failing)).rejects.toThrow('always');
    const key = keyOf(a, 'u1');
    const ttl = await redis.pttl(key);
    // Still locked (until_expired never releases early), but with a TTL, not forever.
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2_000);
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).status).toBe('duplicate');
    await expired(key);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
  });

  it('a job taken by a crashed worker keeps its lock through the stalled-job recovery, and runs once more', async () => {
    const gate = hold();
    const running = hold();
    const a = await start({
      unique: withTtl(60_000),
      paused: true,
      worker: { stalledInterval: 300 },
      handler: async () => {
        running.resolve();
        await gate.promise;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const crashed = await takeWithCrashingWorker(a.queue.name);
    onCleanup(crashed.close);
    expect(crashed.job.id).toBe(first.id);
    const key = keyOf(a, 'u1');
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).status).toBe('duplicate');

    const stalled = queueEvent(a.queueEvents, 'stalled', first.id!);
    a.start();
    await stalled;
    await running.promise;
    expect(await owners(redis, key)).toEqual([first.id]);
    gate.resolve();
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([key]);
    expect(await owners(redis, key)).toEqual([first.id]);
    expect(await redis.pttl(key)).toBeGreaterThan(0);
  });

  it('the TTL of a delayed job counts from its run time (lockTtl + delay)', async () => {
    const atRun = deferred<number>();
    const lockTtl = 2_000;
    const delay = 2_000;
    const a = await start({
      unique: withTtl(lockTtl),
      handler: async (job: TestJob) => {
        atRun.resolve(await redis.pttl(expiringKey(a.prefix, digestOf(a, 'sync', job.data))));
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay }));
    const key = keyOf(a, 'u1');
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(lockTtl + delay - 1_000);
    expect(ttl).toBeLessThanOrEqual(lockTtl + delay);
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).status).toBe('duplicate');
    await a.finished(first);
    // When the job ran, its lock still had (about) lockTtl to live, not lockTtl - delay.
    expect(await atRun.promise).toBeGreaterThan(0);
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).status).toBe('duplicate');
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
  });
});
