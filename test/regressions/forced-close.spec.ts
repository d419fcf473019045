// Review (helper-157): `worker.close(true)` while a handler runs. BullMQ stops renewing the job's lock while the handler
// goes on, so another worker recovers the job as stalled; the recovered copy (the same job id, so the same run-time lock
// owner) re-entered the run-time lock at once and ran beside the first run. Now a worker that closed under a running
// handler closes its lock off (its slot marked 1022/1024): the copy goes back to delayed until that lease ends, and runs
// after the first run (never beside it, and never completed in its place: review helper-159 found a `log` strategy
// completing it without its work when the first run failed or its process died).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { performance } from 'node:perf_hooks';
import type { LockType } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { hold } from '../support/gates.js';
import { overlapping, type Interval } from '../locks/helpers.js';
import { byId, digestOf, runningKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('a worker closed with force while a handler runs', () => {
  const { redis, start, keysOf } = useApps('forced');

  it.each<LockType>(['while_executing', 'until_and_while_executing'])(
    '%s: the copy another worker recovers runs after the first run, not beside it, whatever the first run does',
    async (lock) => {
      const queue = uniqueName('forced');
      const prefix = uniqueName('ujforced');
      const gate = hold();
      const runs: Interval[] = [];
      const handler = (who: string) => async (job: Job) => {
        const run = { id: who, key: 'a', start: performance.now(), end: Infinity };
        runs.push(run);
        if (who === 'w1') await gate.promise;
        run.end = performance.now();
        if (who === 'w1') throw new Error('the first run fails');
        return `${who}:${job.id}`;
      };
      // A short lease: the copy, put back until it ends, comes back soon after the first run gives the lock back.
      const unique = { lock, lockArgs: byId, jobName: 'sync', runtimeLockLease: 1_500 };
      const common = { queue, module: { prefix }, unique };
      // BullMQ recovers a job whose lock is not renewed for 1 s, checking every 0.5 s.
      const worker = { lockDuration: 1_000, stalledInterval: 500 };
      const w1 = await start({ ...common, handler: handler('w1'), worker });
      const job = await w1.queue.add('sync', { id: 'a' }, { attempts: 3 });
      await waitFor('w1 to run the job', async () => runs.length === 1);
      const key = runningKey(prefix, digestOf(w1, 'sync', { id: 'a' }));
      await w1.worker!.close(true);
      await waitFor(
        'the run-time lock to be closed off',
        async () => Number((await redis.zrange(key, '0', '-1', 'WITHSCORES'))[1]) % 1 === 1022 / 1024,
      );
      const w2 = await start({ ...common, handler: handler('w2'), worker });
      // The copy w2 recovered meets its own closed-off slot: back to delayed, its attempts untouched.
      await waitFor('the copy to wait in delayed', async () => (await job.getState()) === 'delayed');
      expect(runs.map((run) => run.id)).toEqual(['w1']);
      gate.resolve(); // the first run fails, which its closed worker cannot record
      await expect(w2.finished(job.id!)).resolves.toBe(`w2:${job.id}`);
      expect(runs.map((run) => run.id)).toEqual(['w1', 'w2']);
      expect(overlapping(runs)).toBeUndefined();
      // One end counted (w2's completion): neither the put-back nor the first run's failure counted an attempt.
      expect((await w2.queue.getJob(job.id!))?.attemptsMade).toBe(1);
      await waitFor('every lock to be given back', async () => (await keysOf(w1)).length === 0);
    },
  );
});
