// A worker's re-take that lands while the job runs again on another worker (which released the until_executing lock
// at its start) takes nothing: the job's BullMQ lock holds the other attempt's token. Else the lock would stay with a
// job that no longer holds it: on the slot-set path for the slot's lease after the job completed (found by the
// session-9 review).
import { describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { JobInterceptor, type JobInstrumentation } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, dedupKey, digestOf, owners, queuedKey } from '../support/locks.js';

describe('a lock re-taken while its job runs elsewhere', () => {
  const { redis, start } = useApps('rvlaterun');

  it.each([
    ['fast path (BullMQ deduplication key)', 1],
    ['general path (lockLimit 2, the library slot set)', 2],
  ])('until_executing, %s: no lock is left held by the completed job', async (_path, lockLimit) => {
    let calls = 0;
    const secondStarted = deferred();
    const firstEnded = deferred();
    const bothEnded = deferred();
    let ended = 0;
    const app = await start({
      unique: { lock: 'until_executing', lockArgs: byId, lockLimit },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        calls += 1;
        if (calls > 1) {
          // Second run (the lock was released at its start): it ends only after the first attempt's re-take landed.
          secondStarted.resolve();
          await firstEnded.promise;
          return 'second run';
        }
        await job.moveToDelayed(Date.now(), job.token);
        await secondStarted.promise;
        throw new DelayedError();
      },
    });
    const instrumentation: JobInstrumentation = {
      run: async (operation, _attributes, work) => {
        try {
          return await work(() => undefined);
        } finally {
          if (operation === 'process') {
            ended += 1;
            if (ended === 1) firstEnded.resolve();
            if (ended === 2) bothEnded.resolve();
          }
        }
      },
    };
    app.moduleRef.get(JobInterceptor).instrument(instrumentation);

    // attempts > 1: with one attempt the first run's endsJob() asks BullMQ's retry rule of the job now active elsewhere
    // and answers 'fails', so no re-take is made at all.
    const job = await app.queue.add('sync', { id: 'late' }, { attempts: 3 });
    await bothEnded.promise;
    expect(await app.finished(job.id!)).toBe('second run');
    const digest = digestOf(app, 'sync', { id: 'late' });
    expect(await redis.exists(dedupKey(app.queue.name, digest))).toBe(0);
    expect(await owners(redis, queuedKey(app.prefix, digest))).toEqual([]);
  });
});
