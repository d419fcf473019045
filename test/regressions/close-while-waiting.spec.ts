// Found by a hostile review (session 33, review 102): a worker closed (`worker.close()`, `app.close()`) while one of
// its jobs waited for its run-time lock held by another worker went on waiting, up to `lockTimeout`, before the close
// could end (and a forced close left the wait running: the handler could start on the closed worker once the holder was
// done). The wait now ends when its worker starts closing: nothing ran, so the job is put back (to delayed, its
// attempts untouched, as `reschedule` does), keeping the enqueue lock it holds, and another worker runs it.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { performance } from 'node:perf_hooks';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, dedupHolder, digestOf, owners, runningKey } from '../support/locks.js';
import { waitFor } from '../support/wait.js';

describe('worker.close while a job waits for its run-time lock', () => {
  const { redis, start } = useApps('closewait');

  it.each(['while_executing', 'until_and_while_executing'] as const)(
    '%s: the close ends at once, the job is put back untouched and runs elsewhere',
    async (lock) => {
      const gate = hold();
      const started = deferred();
      const unique = { lock, lockArgs: byId, lockTimeout: 25_000 };
      const handler = async (job: Job<{ id: string; n: number }>) => {
        if (job.data.n === 1) {
          started.resolve();
          await gate.promise;
        }
        return job.data.n;
      };
      const holder = await start({ unique, handler, worker: { concurrency: 1 } });
      const first = await holder.queue.add('sync', { id: 'a', n: 1 });
      await started.promise;
      const closing = await start({
        queue: holder.queue.name,
        module: { prefix: holder.prefix },
        unique,
        handler,
        worker: { concurrency: 1 },
      });
      const second = await holder.queue.add('sync', { id: 'a', n: 2 });
      await waitFor('the second job to wait on the other worker', async () => (await second.getState()) === 'active');
      const digest = digestOf(holder, 'sync', { id: 'a' });

      const from = performance.now();
      await closing.worker!.close();
      expect(performance.now() - from).toBeLessThan(5_000);

      expect(closing.runs).toEqual([]);
      const back = (await holder.queue.getJob(second.id!))!;
      expect(['delayed', 'waiting']).toContain(await back.getState());
      expect(back.attemptsMade).toBe(0);
      if (lock === 'until_and_while_executing') {
        expect(await dedupHolder(redis, holder.queue.name, digest)).toBe(second.id);
      }
      gate.resolve();
      await expect(holder.finished(first)).resolves.toBe(1);
      await expect(holder.finished(second.id!)).resolves.toBe(2);
      expect(holder.runs.map((job) => job.id)).toEqual([first.id, second.id]);
      expect(await owners(redis, runningKey(holder.prefix, digest))).toEqual([]);
    },
  );
});
