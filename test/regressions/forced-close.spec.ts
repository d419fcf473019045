// Review (helper-157): `worker.close(true)` while a handler runs. BullMQ stops renewing the job's lock while the handler
// goes on, so another worker recovers the job as stalled; the recovered copy (the same job id, so the same run-time lock
// owner) re-entered the run-time lock at once and ran beside the first run. Now a worker that closed under a running
// handler closes its lock off (its slot marked 1022/1024): the copy meets a running job's lock (its strategy: `log`
// completes it, `reschedule` runs it after), and nothing is left once the first run ends.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { performance } from 'node:perf_hooks';
import type { LockType } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { overlapping, type Interval } from '../locks/helpers.js';
import { byId, digestOf, runningKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('a worker closed with force while a handler runs', () => {
  const { redis, start, keysOf } = useApps('forced');

  it.each<[LockType, string]>([
    ['while_executing', 'duplicate'],
    ['until_and_while_executing', 'rescheduled'],
  ])('%s: the copy another worker recovers does not run beside the first run (it meets a %s)', async (lock, met) => {
    const queue = uniqueName('forced');
    const prefix = uniqueName('ujforced');
    const gate = hold();
    const runs: Interval[] = [];
    const handler = (who: string) => async (job: Job) => {
      const run = { id: who, key: 'a', start: performance.now(), end: Infinity };
      runs.push(run);
      if (who === 'w1') await gate.promise;
      run.end = performance.now();
      return `${who}:${job.id}`;
    };
    const rescheduled = met === 'rescheduled' ? { rescheduleIn: 300 } : {};
    const common = { queue, module: { prefix }, unique: { lock, lockArgs: byId, jobName: 'sync', ...rescheduled } };
    // BullMQ recovers a job whose lock is not renewed for 1 s, checking every 0.5 s.
    const worker = { lockDuration: 1_000, stalledInterval: 500 };
    const w1 = await start({ ...common, handler: handler('w1'), worker });
    const job = await w1.queue.add('sync', { id: 'a' });
    await waitFor('w1 to run the job', async () => runs.length === 1);
    const key = runningKey(prefix, digestOf(w1, 'sync', { id: 'a' }));
    await w1.worker!.close(true);
    await waitFor(
      'the run-time lock to be closed off',
      async () => Number((await redis.zrange(key, '0', '-1', 'WITHSCORES'))[1]) % 1 === 1022 / 1024,
    );
    const w2 = await start({ ...common, handler: handler('w2'), worker });
    const events = new EventLog(w2);
    // The copy w2 recovered meets the lock the first run holds: its server strategy (log, reschedule) answers it.
    await events.next((event) => event.type === met && 'jobId' in event && event.jobId === job.id);
    expect(runs.map((run) => run.id)).toEqual(['w1']);
    gate.resolve();
    await w2.finished(job.id!); // log: completed without running; reschedule: run by w2 once due again
    await waitFor('every lock to be given back', async () => (await keysOf(w1)).length === 0);
    expect(runs.map((run) => run.id)).toEqual(met === 'duplicate' ? ['w1'] : ['w1', 'w2']);
    expect(overlapping(runs)).toBeUndefined();
    events.stop();
  });
});
