// A job that ends without its handler returning — a copy that a run-time conflict ends through its strategy (`log`
// completes it; `reject`, or `raise` with no attempts left, fails it for good), a job failed for good, a job BullMQ fails
// for stalling — and a producer that saw that end: a `queue.add` of the same digest from a `completed` or `failed`
// listener (added before the library's or after it), or right after `waitUntilFinished`. The copy's enqueue lock is
// released before BullMQ records the end, so the add is a new job; it was released only on the worker's event, and on
// the slot-set path and with lockTtl such an add met the ended copy (with `log`, `queue.add` answered a handle on it).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { ConflictStrategy } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { Gates } from '../support/gates.js';
import { byId, enqueuedJob } from '../support/locks.js';
import { waitFor } from '../support/wait.js';
import { takeWithCrashingWorker } from '../locks/helpers.js';
import {
  addOnFinalFailure,
  completedEvent,
  holderRunning as running,
  listen,
  ORDERS,
  PATHS,
} from './listener-helpers.js';

describe('a producer that saw a job end enqueues its digest at once', () => {
  const { start, keysOf, onCleanup, redis } = useApps('cer');

  describe.each(PATHS)('%s', (_label, path) => {
    const holderRunning = (server: 'log' | 'reject' | 'raise') =>
      running(start, { onConflict: { client: 'log', server }, ...path });
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
        const { a, gates, first } = await holderRunning('log');
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
        const { a, gates, first } = await holderRunning('reject');
        const added = addOnFinalFailure(a, order);
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
        const { a, gates, first } = await holderRunning(server);
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

    it("a copy whose worker lost BullMQ's job lock while its strategy ran (a stall) leaves its lock to the recovered run", async () => {
      const stalling: ConflictStrategy = {
        name: 'stalling',
        sides: ['server'],
        async onServerConflict({ job }) {
          // As if this worker stalled past BullMQ's job lock and another worker took the job up: the lock is theirs.
          await redis.set(`${job.queueQualifiedName}:${job.id}:lock`, 'the-recovered-run');
          return 'skipped';
        },
      };
      const gates = new Gates().hold('a');
      const a = await start({
        unique: { lock: 'until_and_while_executing', lockArgs: byId, onConflict: { server: 'stalling' }, ...path },
        handler: gates.handler,
        worker: { concurrency: 2 },
        module: { strategies: [stalling] },
      });
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
      await gates.started('a');
      const refused = new Promise<Error>((resolve) => a.worker!.once('error', resolve));
      const copy = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'b' }));
      expect((await refused).message).toMatch(/lock/i); // BullMQ refuses this worker's record of the copy's end
      await expect(a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'c' })).resolves.toMatchObject({
        status: 'duplicate',
        existingJobId: copy.id, // still the copy's, for its recovered run
      });
      await redis.del(`${a.queue.qualifiedName}:${copy.id}:lock`);
      gates.release('a');
      await a.finished(first);
    });

    it('until_and_while_executing, server raise with attempts left: the copy waiting for its retry keeps its lock', async () => {
      const { a, gates, first } = await holderRunning('raise');
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
});
