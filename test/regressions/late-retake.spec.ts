// A worker takes an until_executing job's lock back after a failed attempt, so the retry never waits unlocked. When the
// handler moved the job on itself first (moveToDelayed + DelayedError, as the idempotency layer does for a key in
// progress), the job can run again elsewhere and end before that re-take lands (a command that waited out a
// reconnection: the fault-injection fleet found a deduplication key left held by a completed job). The re-take must
// then take nothing: BullMQ has finished the job, and a lock taken for it would refuse every later job of the digest.
import { describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { JobInterceptor, type JobInstrumentation } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, dedupKey, digestOf, owners, queuedKey } from '../support/locks.js';

describe('a lock re-taken after its job ended elsewhere', () => {
  const { redis, start } = useApps('lateretake');

  it.each([
    ['fast path (BullMQ deduplication key)', 1],
    ['general path (lockLimit 2, the library slot set)', 2],
  ])(
    'until_executing, %s: a job moved to delayed by its handler, run again and completed before the re-take, stays unlocked',
    async (_path, lockLimit) => {
      let calls = 0;
      const bothEnded = deferred();
      let ended = 0;
      const app = await start({
        unique: { lock: 'until_executing', lockArgs: byId, lockLimit },
        worker: { concurrency: 2 },
        handler: async (job: Job) => {
          calls += 1;
          if (calls > 1) return 'second run';
          // First run: the job moves on (delayed, due now); the worker's other slot runs it again and completes it
          // before this attempt ends, as a re-take delayed by a reconnection would see it.
          await job.moveToDelayed(Date.now(), job.token);
          await app.finished(job.id!);
          throw new DelayedError();
        },
      });
      // Each process operation's end: the first attempt's hooks (the re-take) have run once both ended.
      const instrumentation: JobInstrumentation = {
        run: async (operation, _attributes, work) => {
          try {
            return await work(() => undefined);
          } finally {
            if (operation === 'process' && ++ended === 2) bothEnded.resolve();
          }
        },
      };
      app.moduleRef.get(JobInterceptor).instrument(instrumentation);

      const job = await app.queue.add('sync', { id: 'late' });
      await bothEnded.promise;
      expect(await job.getState()).toBe('completed');
      expect((await app.queue.getJob(job.id!))?.returnvalue as unknown).toBe('second run');
      // No lock left behind for a finished job: the digest takes a new job.
      const digest = digestOf(app, 'sync', { id: 'late' });
      expect(await redis.exists(dedupKey(app.queue.name, digest))).toBe(0);
      expect(await owners(redis, queuedKey(app.prefix, digest))).toEqual([]);
      const next = await app.queue.add('sync', { id: 'late' });
      expect(next.id).not.toBe(job.id);
      expect(await app.finished(next)).toBe('second run');
    },
  );
});
