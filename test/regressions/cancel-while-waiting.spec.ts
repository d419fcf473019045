// Found by a hostile review (session 28): a job cancelled with BullMQ's `worker.cancelJob` while it waited for its
// run-time lock (`lockTimeout`) went on waiting, and its handler ran once the holder was done, with the signal aborted.
// The wait now ends when the job's signal is aborted: the job fails with an `AbortError` (its `cause` the reason given
// to `cancelJob`), as a handler honouring its signal would, and the handler is never called.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, owners, runningKey } from '../support/locks.js';
import { waitFor } from '../support/wait.js';

describe('worker.cancelJob while a job waits for its run-time lock', () => {
  const { redis, start } = useApps('cancel');

  it.each(['while_executing', 'until_and_while_executing'] as const)(
    '%s: the wait ends, the job fails with an AbortError, its handler never runs',
    async (lock) => {
      const gate = hold();
      const started = deferred();
      const app = await start({
        unique: { lock, lockArgs: byId, lockTimeout: 60_000 },
        worker: { concurrency: 2 },
        acceptsSignal: true,
        handler: async (job: Job<{ id: string; n: number }>) => {
          started.resolve();
          await gate.promise;
          return job.data.n;
        },
      });
      const first = await app.queue.add('sync', { id: 'a', n: 1 });
      await started.promise;
      // (until_and_while_executing: the first job gave its enqueue lock up as it started.)
      const second = await app.queue.add('sync', { id: 'a', n: 2 });
      // BullMQ tracks the job's abort controller once its worker has fetched it.
      await waitFor('the worker to cancel the job', () => app.worker!.cancelJob(second.id!, 'user cancelled'));
      const failure = await app.finished(second).then(
        () => undefined,
        (error: Error) => error.message,
      );
      expect(failure).toContain('cancelled while it waited for its run-time lock');
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      // The holder keeps its lock; it gives it back when it is done.
      expect(await owners(redis, runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' })))).toHaveLength(1);
      gate.resolve();
      await expect(app.finished(first)).resolves.toBe(1);
      expect(await owners(redis, runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' })))).toEqual([]);
    },
  );
});
