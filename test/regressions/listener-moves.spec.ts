// A user's worker event listener that moves the job at once: `job.retry()` from a `failed` listener, or a `queue.add`
// of the same digest from a `completed` or `failed` listener, registered before the library's (prependListener) or
// after it (`worker.on`, as @OnWorkerEvent does). The library's own `finished` hook runs on the same events, unawaited:
// it must not release the lock the retried job just took back, and it must have released the ended job's lock before
// the user's add meets it. After the retry, the job holds its lock (a duplicate is refused) and lets it go at its end.
// A copy that a run-time conflict ends (its strategy completes it, or fails it for good) releases its enqueue lock
// before BullMQ records the end, so a producer that saw the end (its listener, or `waitUntilFinished`) finds the
// digest free: it was released only after that record, on the worker's event, and such a producer met the ended copy.
import { describe, expect, it } from '@jest/globals';
import type { Job, QueueEvents, Worker } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred, type Deferred } from '../support/deferred.js';
import { Gates, hold } from '../support/gates.js';
import { byId, digestOf, enqueuedJob, expiringKey, owners, queuedKey } from '../support/locks.js';
import { waitFor } from '../support/wait.js';
import { takeWithCrashingWorker } from '../locks/helpers.js';

type Order = 'before' | 'after';
const ORDERS: Order[] = ['before', 'after'];

/** The enqueue-lock paths: BullMQ's deduplication key (with and without TTL), and the library's slot set. */
const PATHS: [string, Partial<UniqueJobOptions>][] = [
  ['fast path', {}],
  ['fast path with lockTtl', { lockTtl: 60_000 }],
  ['slot set (uniqueAcross queues)', { uniqueAcross: 'queues' }],
];

/** Adds `listener` to a worker event before the library's listener, or after it. */
function listen(worker: Worker, event: 'failed' | 'completed', order: Order, listener: (job?: Job) => void): void {
  const untyped = worker as unknown as {
    on(event: string, l: (job?: Job) => void): void;
    prependListener(event: string, l: (job?: Job) => void): void;
  };
  if (order === 'before') untyped.prependListener(event, listener);
  else untyped.on(event, listener);
}

/** Calls `job.retry()` synchronously from the first `failed` event of a job failed for good; resolves the job. */
function retryOnFinalFailure(worker: Worker, order: Order): Deferred<Job> {
  const retried = deferred<Job>();
  let done = false;
  listen(worker, 'failed', order, (job) => {
    if (!job?.finishedOn || done) return;
    done = true;
    job.retry('failed').then(() => retried.resolve(job), retried.reject);
  });
  return retried;
}

/** Adds a job of the same digest (`tag: 'again'`) from the first `failed` event of a job failed for good. */
function addOnFinalFailure(a: TestApp, order: Order): Deferred<Job> {
  const added = deferred<Job>();
  let done = false;
  listen(a.worker!, 'failed', order, (job) => {
    if (!job?.finishedOn || done) return;
    done = true;
    a.queue.add('sync', { id: 'u1', tag: 'again' }).then(added.resolve, added.reject);
  });
  return added;
}

/** Resolves when QueueEvents reports `jobId` completed (subscribe before the transition). */
function completedEvent(events: QueueEvents, jobId: string): Promise<void> {
  return new Promise((resolve) => {
    const listener = ({ jobId: id }: { jobId: string }) => {
      if (id !== jobId) return;
      events.off('completed', listener);
      resolve();
    };
    events.on('completed', listener);
  });
}

describe('a worker event listener of the user that moves the job at once', () => {
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
        const second = hold();
        const secondStarted = deferred();
        let calls = 0;
        const a = await start({
          unique: { lock: 'until_executed', lockArgs: byId, ...path },
          handler: async (job) => {
            if ((job.data as { tag: string }).tag !== 'first') return 'other';
            if (++calls === 1) throw new Error('boom');
            secondStarted.resolve();
            await second.promise;
            return 'second';
          },
        });
        const retried = retryOnFinalFailure(a.worker!, order);
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }, { attempts: 1 }));
        expect((await retried.promise).id).toBe(job.id);
        await secondStarted.promise;
        await expectHeldThenFreed(a, job, () => second.resolve());
        expect(calls).toBe(2);
      },
    );

    it.each(ORDERS.flatMap((order) => (['reject', 'raise'] as const).map((server) => [server, order] as const)))(
      'until_and_while_executing, server %s: job.retry() of the copy it failed (%s the library) keeps its lock',
      async (server, order) => {
        const gates = new Gates().hold('a');
        const a = await start({
          unique: {
            lock: 'until_and_while_executing',
            lockArgs: byId,
            onConflict: { client: 'reject', server },
            lockTimeout: 2_000,
            ...path,
          },
          handler: gates.handler,
          worker: { concurrency: 2 },
        });
        const retried = retryOnFinalFailure(a.worker!, order);
        const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
        await gates.started('a');
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

    it.each(ORDERS)(
      'until_executed: a queue.add of the digest from a completed listener (%s the library) is enqueued',
      async (order) => {
        const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, ...path } });
        const added = deferred<Job>();
        let done = false;
        listen(a.worker!, 'completed', order, (job) => {
          if (!job || done) return;
          done = true;
          a.queue.add('sync', { id: 'u1', tag: 'again' }).then(added.resolve, added.reject);
        });
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }));
        const again = await added.promise;
        expect(again.id).not.toBe(job.id); // a new job, not a handle on the completed one
        await a.finished(again.id!);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
        expect(a.runs.map((run) => (run.data as { tag: string }).tag)).toEqual(['first', 'again']);
      },
    );

    it.each(ORDERS)(
      'until_and_while_executing, server log: a queue.add from the completed listener of the copy (%s the library) is enqueued',
      async (order) => {
        const gates = new Gates().hold('a');
        const a = await start({
          unique: {
            lock: 'until_and_while_executing',
            lockArgs: byId,
            onConflict: { client: 'log', server: 'log' },
            lockTimeout: 0,
            ...path,
          },
          handler: gates.handler,
          worker: { concurrency: 2 },
        });
        const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
        await gates.started('a');
        const added = deferred<Job>();
        listen(a.worker!, 'completed', order, (job) => {
          if ((job?.data as { tag?: string } | undefined)?.tag !== 'b') return;
          a.queue.add('sync', { id: 'u1', tag: 'c' }).then(added.resolve, added.reject);
        });
        const copy = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'b' }));
        // B meets A's run-time lock and completes through `log`: its enqueue lock ends with it, so C is a new job.
        const third = await added.promise;
        expect(third.id).not.toBe(copy.id);
        expect(await a.queue.getJobState(third.id!)).not.toBe('unknown');
        gates.release('a');
        await a.finished(first);
        await a.finished(third.id!);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
      },
    );

    it.each(ORDERS)(
      'until_executed, attempts 1: a queue.add of the digest from a failed listener (%s the library) is enqueued',
      async (order) => {
        const a = await start({
          unique: { lock: 'until_executed', lockArgs: byId, ...path },
          handler: async (job) => {
            if ((job.data as { tag: string }).tag === 'first') throw new Error('boom');
            return 'ran';
          },
        });
        const added = addOnFinalFailure(a, order);
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }, { attempts: 1 }));
        const again = await added.promise;
        expect(again.id).not.toBe(job.id);
        await expect(a.finished(again.id!)).resolves.toBe('ran');
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
      },
    );

    it.each(ORDERS)(
      'until_and_while_executing, server reject: a queue.add from the failed listener of the rejected copy (%s the library) is enqueued',
      async (order) => {
        const gates = new Gates().hold('a');
        const a = await start({
          unique: {
            lock: 'until_and_while_executing',
            lockArgs: byId,
            onConflict: { client: 'log', server: 'reject' },
            lockTimeout: 0,
            ...path,
          },
          handler: gates.handler,
          worker: { concurrency: 2 },
        });
        const added = addOnFinalFailure(a, order);
        const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
        await gates.started('a');
        const copy = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'b' }, { attempts: 1 }));
        const again = await added.promise;
        expect(again.id).not.toBe(copy.id);
        gates.release('a');
        await a.finished(first);
        await a.finished(again.id!).catch(() => undefined); // it may meet A's run-time lock too: rejected
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
      },
    );

    // Only after the library's listener (as @OnWorkerEvent adds it): a job BullMQ fails without calling the processor
    // gives its lock back on that event, so a listener added before the library's may still meet it (documented).
    it.each(['after' as const])(
      'until_executed, a job failed for stalling: a queue.add from a failed listener (%s the library) is enqueued',
      async (order) => {
        const a = await start({
          unique: { lock: 'until_executed', lockArgs: byId, ...path },
          worker: { maxStalledCount: 0, stalledInterval: 300 },
          paused: true,
        });
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'first' }));
        const crashed = await takeWithCrashingWorker(a.queue.name);
        onCleanup(() => crashed.close());
        const added = addOnFinalFailure(a, order);
        a.start();
        const again = await added.promise;
        expect(again.id).not.toBe(job.id);
        await a.finished(again.id!);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
      },
    );

    it.each(['log', 'reject', 'raise'] as const)(
      'until_and_while_executing, server %s: once waitUntilFinished of the copy settles, its digest is free',
      async (server) => {
        const gates = new Gates().hold('a');
        const a = await start({
          unique: {
            lock: 'until_and_while_executing',
            lockArgs: byId,
            onConflict: { client: 'log', server },
            lockTimeout: 0,
            ...path,
          },
          handler: gates.handler,
          worker: { concurrency: 2 },
        });
        const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
        await gates.started('a');
        for (let i = 0; i < 3; i++) {
          // The copy meets A's run-time lock and ends through the strategy; the producer sees that end, then enqueues.
          const copy = enqueuedJob(
            await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: `b${i}` }, { attempts: 1 }),
          );
          await a.finished(copy).catch(() => undefined);
          const again = await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: `c${i}` }, { attempts: 1 });
          expect(again.status).toBe('enqueued');
          if (again.status === 'enqueued') await a.finished(again.job).catch(() => undefined);
        }
        gates.release('a');
        await a.finished(first);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
        expect(a.runs.map((job) => (job.data as { tag: string }).tag)).toEqual(['a']);
      },
    );

    it('until_and_while_executing, server raise with attempts left: the copy waiting for its retry keeps its lock', async () => {
      const gates = new Gates().hold('a');
      const a = await start({
        unique: {
          lock: 'until_and_while_executing',
          lockArgs: byId,
          onConflict: { client: 'log', server: 'raise' },
          lockTimeout: 0,
          ...path,
        },
        handler: gates.handler,
        worker: { concurrency: 2 },
      });
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
      await gates.started('a');
      const failedOnce = new Promise<void>((resolve) => a.worker!.once('failed', () => resolve()));
      const copy = enqueuedJob(
        await a.service.enqueue(
          a.queue,
          'sync',
          { id: 'u1', tag: 'b' },
          { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
        ),
      );
      await failedOnce;
      expect(await a.queue.getJobState(copy.id!)).toBe('delayed');
      await expect(a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'c' })).resolves.toMatchObject({
        status: 'duplicate',
        existingJobId: copy.id,
      });
      gates.release('a');
      await a.finished(first);
      const copyDone = completedEvent(a.queueEvents, copy.id!);
      await (await a.queue.getJob(copy.id!))!.promote();
      await copyDone;
      await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
      expect(a.runs.map((job) => (job.data as { tag: string }).tag)).toEqual(['a', 'b']);
    });
  });

  it.each(ORDERS)(
    'until_executed, lockLimit 2: job.retry() from a failed listener (%s the library) keeps its slot, given back at the end',
    async (order) => {
      const second = hold();
      const secondStarted = deferred();
      let calls = 0;
      const a = await start({
        unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
        handler: async () => {
          if (++calls === 1) throw new Error('boom');
          secondStarted.resolve();
          await second.promise;
          return 'second';
        },
      });
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
