// Hostile review (session 36, review 115) of the lock types and conflict strategies under BullMQ's moves: step jobs,
// job schedulers, crashes. Each case failed before its fix.
import { describe, expect, it } from '@jest/globals';
import { DelayedError, Queue, type Job } from 'bullmq';
import type { LockType } from '../../lib/index.js';
import { stepHandler } from '../support/step-handler.js';
import { useApps } from '../support/apps.js';
import { digestOf, owners, runningKey, runtimeOwner } from '../support/locks.js';
import { bullOptions } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { isParkedScore, PARKED_MARK } from '../../lib/locks/lock-marks.js';
import { BullJobReads } from '../../lib/redis/bull-job-reads.js';
import { LockStore } from '../../lib/locks/lock-store.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';

type StepData = { id: string; step?: number };

// A step job's run-time lock is computed from the job's data when no enqueue lock fixed its digest (`while_executing`,
// or a job added without the library), and the BullMQ step pattern stores the next step in that data
// (`job.updateData`). With lock arguments that read it (the default: the whole data), the step parked its run-time lock
// under the digest of the data it started with, while its next delivery, and a guarded `changeDelay`/`promote`, looked
// for it under the digest of the new data: the next step did not re-enter it, a move did not follow it, and it outlived
// the job. A new job with the data the first one was enqueued with, added after that job had completed, ended through
// `log` without running its handler (up to `runtimeLockLease` past the step's run time). The parked lock now moves to
// the digest of the data the job's next delivery will read.
describe.each(['while_executing', 'until_and_while_executing'] as const)(
  'session 36: a step job whose updateData changes its run-time digest (%s, added without an enqueue lock)',
  (lock: LockType) => {
    const { redis, start, keysOf, onCleanup } = useApps('s36-step-digest');

    it('parks its run-time lock under the digest its next step takes; nothing is left once it completed', async () => {
      const ran: string[] = [];
      const app = await start({
        // No lockArgs: the digest is the whole data, step included. A lease far longer than the test: only a release
        // frees the lock.
        unique: { lock, jobName: 'sync', runtimeLockLease: 120_000, onConflict: 'log' },
        handler: stepHandler(ran, { delayMs: 60_000 }),
      });
      // Added by a producer the library does not guard (a job scheduler, a FlowProducer, another service): no enqueue
      // lock, so its run-time digest follows its data under either lock type.
      const unguarded = new Queue(app.queue.name, bullOptions());
      onCleanup(() => unguarded.close());
      const firstId = (await unguarded.add('sync', { id: 'a' })).id!;
      const before = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
      const after = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a', step: 2 }));
      // The job is delayed as soon as its handler moved it, before the attempt ended and the worker parked its slot:
      // wait for the old slot to be given back (the park's last step), not for the job's state.
      await waitFor(
        'the job parked',
        async () =>
          ran.length === 1 &&
          (await app.queue.getJobState(firstId)) === 'delayed' &&
          (await owners(redis, before)).length === 0,
      );
      expect(await owners(redis, after)).toEqual([firstId]);
      expect(isParkedScore(Number(await redis.zscore(after, runtimeOwner(app, firstId))))).toBe(true);
      // A guarded promote follows it (the next delivery re-enters it).
      await (await app.queue.getJob(firstId))!.promote();
      await expect(app.finished(firstId)).resolves.toBe('done');
      expect(ran).toEqual([`${firstId}:1`, `${firstId}:2`]);
      expect(await keysOf(app)).toEqual([]);
      // A new job with the data the first one started with runs (it met the stale parked lock and ended through log).
      const again = await unguarded.add('sync', { id: 'a', step: 2 });
      await expect(app.finished(again)).resolves.toBe('done');
      const fresh = await unguarded.add('sync', { id: 'a' });
      await waitFor('the new job parked', async () => (await app.queue.getJobState(fresh.id!)) === 'delayed');
      expect(ran).toContain(`${fresh.id}:1`);
      await (await app.queue.getJob(fresh.id!))!.promote();
      await expect(app.finished(fresh)).resolves.toBe('done');
      expect(await keysOf(app)).toEqual([]);
    }, 30_000);
  },
);

// The same move when the job is due at once (`moveToDelayed(Date.now())`): its next delivery may take the new digest's
// run-time lock before the step's park of it is sent. The park re-entered that slot as the same owner, replacing the
// running delivery's mark: that delivery could neither renew nor give it back, and the slot stayed parked after the job
// completed. A park now leaves a slot the owner holds there as it is (and, since session 51, a step whose job started
// again before its mark parks nothing).
describe('session 36: a step job due at once whose next delivery takes the new digest before the park', () => {
  const { start, keysOf, onCleanup } = useApps('s36-step-digest-race');

  it('the next delivery keeps its slot: nothing is left once it completed, no lease lost', async () => {
    const stepTwoStarted = deferred();
    const parkSent = deferred();
    const acquire = LockStore.prototype.acquire;
    LockStore.prototype.acquire = async function (this: LockStore, ...args: Parameters<LockStore['acquire']>) {
      if (args[5] !== PARKED_MARK) return acquire.apply(this, args);
      await stepTwoStarted.promise;
      try {
        return await acquire.apply(this, args);
      } finally {
        parkSent.resolve();
      }
    };
    // Since session 51 the park is not sent at all when step 2 started before step 1's mark (a later start of the job):
    // that counts as sent too.
    const mark = BullJobReads.prototype.markParked;
    BullJobReads.prototype.markParked = async function (
      this: BullJobReads,
      ...args: Parameters<BullJobReads['markParked']>
    ) {
      const marked = await mark.apply(this, args);
      if (!marked) parkSent.resolve();
      return marked;
    };
    onCleanup(async () => {
      LockStore.prototype.acquire = acquire;
      BullJobReads.prototype.markParked = mark;
    });
    const app = await start({
      unique: { lock: 'while_executing', jobName: 'sync', runtimeLockLease: 120_000 },
      worker: { concurrency: 2 },
      handler: async (job: Job<StepData>) => {
        if ((job.data.step ?? 1) === 1) {
          await job.updateData({ ...job.data, step: 2 });
          await job.moveToDelayed(Date.now(), job.token);
          throw new DelayedError();
        }
        stepTwoStarted.resolve();
        await parkSent.promise;
        return 'done';
      },
    });
    const events = new EventLog(app);
    const first = await app.queue.add('sync', { id: 'a' });
    await expect(app.finished(first)).resolves.toBe('done');
    // Step 1's attempt gives its old slot back after the park, which step 2 may outrun to completion: waited for.
    await waitFor('nothing left', async () => (await keysOf(app)).length === 0);
    expect(events.of('lockLost')).toEqual([]);
  }, 30_000);
});
