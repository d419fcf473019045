// The late re-take of test/regressions/late-retake.spec.ts with `uniqueAcross: 'queues'` (slot-set path): the lock is
// the job's for as long as the job lives (unlike an until_expired period), so a worker's re-take for a job that
// completed elsewhere meanwhile takes nothing (found by the session-9 review: it took a 24 h slot for the completed
// job, and the next job of the digest was refused).
import { describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { JobInterceptor, type JobInstrumentation } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, digestOf, owners, queuedKey } from '../support/locks.js';

describe('a lock re-taken after its job ended elsewhere, unique across queues', () => {
  const { redis, start } = useApps('rvlateacross');

  it('until_executing, uniqueAcross queues: a job completed before its first attempt re-takes stays unlocked', async () => {
    let calls = 0;
    const bothEnded = deferred();
    let ended = 0;
    const app = await start({
      unique: { lock: 'until_executing', lockArgs: byId, uniqueAcross: 'queues' },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        calls += 1;
        if (calls > 1) return 'second run';
        await job.moveToDelayed(Date.now(), job.token);
        await app.finished(job.id!);
        throw new DelayedError();
      },
    });
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
    const digest = digestOf(app, 'sync', { id: 'late' });
    // Nothing taken for the completed job: no slot left (its lease would be 24 h by default).
    expect(await owners(redis, queuedKey(app.prefix, digest))).toEqual([]);
    const next = await app.queue.add('sync', { id: 'late' });
    expect(next.id).not.toBe(job.id);
  });
});
