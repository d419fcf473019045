// Hostile review (session 35) of the BullMQ moves that do not pass through `queue.add`, job schedulers and flows
// (docs/how-locks-move.md). Each case failed before its fix, or says in a `BUG:` comment what it still shows wrong, or
// says why it is kept as a control.
import { describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import type { LockType } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, runningKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

type StepData = { id: string; step?: number };

// A step job parks its run-time lock until it is due plus `runtimeLockLease` (stepParkedMs). A guarded
// `job.changeDelay` moved only the enqueue lock's TTL: the parked R kept its old end, so once the job's old run time
// plus a lease had passed, a duplicate started and ran step 1 while the first job waited between its steps — and the
// first job, due later, met the duplicate's R and ended through `log` without running its next step.
describe.each(['while_executing', 'until_and_while_executing'] as const)(
  'session 35: job.changeDelay of a parked step job (%s)',
  (lock: LockType) => {
    const { redis, start } = useApps('s35-park-delay');

    it('moves the parked run-time lock to the new run time: a duplicate meets it, the first job runs its step 2', async () => {
      const lease = 500;
      const ran: string[] = [];
      const app = await start({
        unique: { lock, lockArgs: byId, jobName: 'sync', runtimeLockLease: lease, onConflict: 'log' },
        handler: async (job: Job<StepData>) => {
          const step = job.data.step ?? 1;
          ran.push(`${job.id}:${step}`);
          if (step === 1) {
            await job.updateData({ ...job.data, step: 2 });
            await job.moveToDelayed(Date.now() + lease, job.token);
            throw new DelayedError();
          }
          return 'done';
        },
      });
      const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
      const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('step') });
      await waitFor('the job parked', async () => (await first.getState()) === 'delayed');
      const parkedUntil = Number(await redis.zscore(running, first.id!));
      await (await app.queue.getJob(first.id!))!.changeDelay(60_000);
      const movedAt = Date.now();
      expect(Number(await redis.zscore(running, first.id!))).toBeGreaterThanOrEqual(movedAt + 60_000);
      // Past the end the parked lock had before the move: a duplicate still meets it.
      await waitFor('the old parked lease to pass', () => Date.now() > parkedUntil + 50, 10_000);
      // until_and_while_executing: the first job holds E again while parked; the duplicate is refused at enqueue then.
      const duplicate = await app.service.enqueue(app.queue, 'sync', { id: 'a' });
      if (duplicate.status === 'enqueued') await expect(app.finished(duplicate.job.id!)).resolves.toBeNull();
      expect(ran).toEqual([`${first.id}:1`]);
      await (await app.queue.getJob(first.id!))!.promote();
      await expect(app.finished(first.id!)).resolves.toBe('done');
      expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    }, 30_000);
  },
);
