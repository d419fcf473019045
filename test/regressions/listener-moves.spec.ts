// A user's worker event listener that moves the job at once: `job.retry()` from a `failed` listener, added before the
// library's (prependListener) or after it (`worker.on`, as @OnWorkerEvent does). The library's own `finished` hook runs
// on the same event, unawaited: it must not release the lock the retried job just took back. After the retry the job
// holds its lock (a duplicate is refused) and lets it go at its end. (Adds from listeners: conflict-end-release.)
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, enqueuedJob, expiringKey, owners, queuedKey } from '../support/locks.js';
import { waitFor } from '../support/wait.js';
import { takeWithCrashingWorker } from '../locks/helpers.js';
import { completedEvent, holderRunning, ORDERS, PATHS, retryOnFinalFailure } from './listener-helpers.js';

/**
 * A handler that fails the first run of the job tagged `first` and holds its second run until `second.resolve()`
 * (`secondStarted` resolves as it starts); other jobs return `'other'`. `calls()`: how often it ran the tagged job.
 */
function failsOnceThenHolds() {
  const second = hold();
  const secondStarted = deferred();
  let calls = 0;
  const handler = async (job: Job) => {
    if ((job.data as { tag: string }).tag !== 'first') return 'other';
    if (++calls === 1) throw new Error('boom');
    secondStarted.resolve();
    await second.promise;
    return 'second';
  };
  return { handler, second, secondStarted, calls: () => calls };
}

describe('job.retry() from a worker event listener of the user', () => {
  const { redis, start, keysOf, onCleanup } = useApps('lsn');

  /** The retried job holds the lock: a duplicate is refused naming it; after it completes, nothing is left locked. */
  async function expectHeldThenFreed(a: TestApp, job: Job, release: () => void): Promise<void> {
    const duplicate = await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'dup' });
    expect(duplicate).toMatchObject({ status: 'duplicate', existingJobId: job.id });
    const completed = completedEvent(a.queueEvents, job.id!);
    release();
    await completed;
    await waitFor('the lock to be released', async () => (await keysOf(a)).length === 0);
    const later = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'later' }));
    await a.finished(later);
    await waitFor('the later job to release its lock', async () => (await keysOf(a)).length === 0);
  }

  describe.each(PATHS)('%s', (_label, path) => {
    it.each(ORDERS)(
      'until_executed, attempts 1: job.retry() from a failed listener (%s the library) keeps the lock, released at the end',
      async (order) => {
        const { handler, second, secondStarted, calls } = failsOnceThenHolds();
        const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, ...path }, handler });
        const retried = retryOnFinalFailure(a.worker!, order);
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }, { attempts: 1 }));
        expect((await retried.promise).id).toBe(job.id);
        await secondStarted.promise;
        await expectHeldThenFreed(a, job, () => second.resolve());
        expect(calls()).toBe(2);
      },
    );

    it.each(ORDERS.flatMap((order) => (['reject', 'raise'] as const).map((server) => [server, order] as const)))(
      'until_and_while_executing, server %s: job.retry() of the copy it failed (%s the library) keeps its lock',
      async (server, order) => {
        const { a, gates, first } = await holderRunning(start, {
          onConflict: { client: 'reject', server },
          lockTimeout: 2_000,
          ...path,
        });
        const retried = retryOnFinalFailure(a.worker!, order);
        const copy = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'b' }, { attempts: 1 }));
        // The copy meets A's run-time lock, is rejected (failed for good), and the listener retries it at once: it waits
        // for A's run-time lock again, holding its enqueue lock.
        expect((await retried.promise).id).toBe(copy.id);
        const duplicate = await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'dup' });
        expect(duplicate).toMatchObject({ status: 'duplicate', existingJobId: copy.id });
        const copyDone = completedEvent(a.queueEvents, copy.id!);
        gates.release('a');
        await a.finished(first);
        await copyDone;
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
        expect(a.runs.map((job) => (job.data as { tag: string }).tag)).toEqual(['a', 'b']);
      },
    );

    it.each(ORDERS)(
      'until_executed, a job failed for stalling: job.retry() from a failed listener (%s the library) keeps the lock',
      async (order) => {
        const second = hold();
        const started = deferred();
        const a = await start({
          unique: { lock: 'until_executed', lockArgs: byId, ...path },
          worker: { maxStalledCount: 0, stalledInterval: 300 },
          paused: true,
          handler: async () => {
            started.resolve();
            await second.promise;
            return 'ran';
          },
        });
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }));
        const crashed = await takeWithCrashingWorker(a.queue.name);
        onCleanup(() => crashed.close());
        const retried = retryOnFinalFailure(a.worker!, order);
        a.start();
        const failed = await retried.promise;
        expect(failed.id).toBe(job.id);
        expect(failed.failedReason ?? '').toMatch(/stalled more than allowable limit|^$/);
        await started.promise;
        expect(a.runs).toHaveLength(1); // the run after the retry: the stalled one never reached the processor
        await expectHeldThenFreed(a, job, () => second.resolve());
      },
    );
  });

  it.each(ORDERS)(
    'until_executed, lockLimit 2: job.retry() from a failed listener (%s the library) keeps its slot, given back at the end',
    async (order) => {
      const { handler, second, secondStarted } = failsOnceThenHolds();
      const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, handler });
      const retried = retryOnFinalFailure(a.worker!, order);
      const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }, { attempts: 1 }));
      await retried.promise;
      await secondStarted.promise;
      const slots = queuedKey(a.prefix, digestOf(a, 'sync', { id: 'u1' }));
      expect(await owners(redis, slots)).toEqual([job.id]);
      const completed = completedEvent(a.queueEvents, job.id!);
      second.resolve();
      await completed;
      await waitFor('the slot to be given back', async () => (await keysOf(a)).length === 0);
    },
  );

  it.each(ORDERS)(
    'until_expired: job.retry() from a failed listener (%s the library) runs in its own period, which then ends with its TTL',
    async (order) => {
      let calls = 0;
      const a = await start({
        unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 },
        handler: async () => {
          if (++calls === 1) throw new Error('boom');
          return 'second';
        },
      });
      const retried = retryOnFinalFailure(a.worker!, order);
      const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }, { attempts: 1 }));
      const completed = completedEvent(a.queueEvents, job.id!);
      await retried.promise;
      await completed;
      const period = expiringKey(a.prefix, digestOf(a, 'sync', { id: 'u1' }));
      expect(await owners(redis, period)).toEqual([job.id]);
      const ttl = await redis.pttl(period);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
      await expect(a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'dup' })).resolves.toMatchObject({
        status: 'duplicate',
        existingJobId: job.id,
      });
      expect(calls).toBe(2);
    },
  );
});
