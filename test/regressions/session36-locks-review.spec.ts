// Hostile review (session 36) of the lock types and conflict strategies in their less-trodden combinations. Each case
// failed before its fix.
import { describe, expect, it } from '@jest/globals';
import { Queue, type JobsOptions } from 'bullmq';
import { LockStore } from '../../lib/locks/lock-store.js';
import { stepHandler } from '../support/step-handler.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import {
  asDuplicate,
  asEnqueued,
  byId,
  dedupHolder,
  digestOf,
  expiringKey,
  owners,
  runningKey,
  runtimeOwner,
  waitForParked,
} from '../support/locks.js';
import { bullOptions, bullPrefix, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

// `replace` checks that the holder never started, then removes it; a worker may run the holder to its end in between
// (replace-races.spec.ts). For `until_executed` the lock is free by then and the new job is enqueued. An `until_expired`
// holder that ran keeps its period, though: the replacer released the period with the removed record and enqueued the
// new job, which ran in the same period as the holder.
describe('session 36: replace racing with an until_expired holder that runs to its end', () => {
  const { redis, start } = useApps('s36-replace-expired');

  it.each([{}, { removeOnComplete: true }] as JobsOptions[])(
    'the holder keeps its period: the new job falls back to reject and does not run (%j)',
    async (opts) => {
      const app = await start({
        unique: { lock: 'until_expired', lockTtl: 60_000, onConflict: 'replace', lockArgs: byId },
        paused: true,
      });
      const events = new EventLog(app);
      const first = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 1 }, opts));
      const ran = app.finished(first.job);
      const requireWritable = LockStore.prototype.requireWritable;
      let raced = false;
      // Asked just before the removal, after the holder's state was read: the holder runs to its end there.
      LockStore.prototype.requireWritable = async function (this: LockStore, ...args) {
        if (!raced) {
          raced = true;
          app.start();
          await ran;
        }
        return requireWritable.apply(this, args);
      };
      let second;
      try {
        second = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 2 }));
      } finally {
        LockStore.prototype.requireWritable = requireWritable;
      }
      expect(raced).toBe(true);
      expect(second).toMatchObject({ strategy: 'reject', existingJobId: first.job.id });
      expect(events.of('replaced')).toEqual([]);
      const key = expiringKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
      expect(await owners(redis, key)).toEqual([first.job.id]);
      expect(await app.queue.getJobCounts('wait', 'delayed', 'prioritized', 'active')).toEqual({
        wait: 0,
        delayed: 0,
        prioritized: 0,
        active: 0,
      });
      expect(app.runs.map((job) => job.data as unknown)).toEqual([{ id: 'a', n: 1 }]);
      // The period still refuses a later duplicate; the rejected payload waits in the dead set.
      expect(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 3 })).toMatchObject({
        status: 'duplicate',
        existingJobId: first.job.id,
      });
      const entry = await app.service.deadSet.get(second.deadSetEntryId!);
      expect(entry?.data).toEqual({ id: 'a', n: 2 });
      for (const stored of await app.service.deadSet.list({ offset: 0, limit: 10 })) {
        await app.service.deadSet.delete(stored.id);
      }
    },
  );
});

// `replace` kept a holder that is a flow child, but removed one that is a flow parent (a job other jobs were added
// with `parent` naming it): BullMQ's removal took the parent's children with it, jobs of their own (here of another,
// unguarded queue), gone without a trace: no dead-set entry, no event.
describe('session 36: replace meeting a holder that is a flow parent', () => {
  const { redis, start, onCleanup } = useApps('s36-replace-parent');

  it('keeps the parent and its child: the new job falls back to reject', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
    });
    const children = new Queue(uniqueName('s36-children'), bullOptions());
    onCleanup(async () => {
      await children.obliterate({ force: true });
      await children.close();
    });
    const parent = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 1 }));
    const child = await children.add(
      'child',
      { keep: true },
      { parent: { id: parent.job.id!, queue: `${bullPrefix()}:${app.queue.name}` } },
    );
    const second = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 2 }));
    expect(second).toMatchObject({ strategy: 'reject', existingJobId: parent.job.id });
    expect(await children.getJobState(child.id!)).toBe('waiting');
    expect(await app.queue.getJobState(parent.job.id!)).toBe('waiting');
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: 'a' }))).toBe(parent.job.id);
    expect((await app.service.deadSet.get(second.deadSetEntryId!))?.data).toEqual({ id: 'a', n: 2 });
    await app.service.deadSet.delete(second.deadSetEntryId!);
  });
});

// `until_and_while_executing` with client `replace` and server `reschedule`: a copy that met the running job's run-time
// lock goes back to delayed with its enqueue lock, its handler never run. `replace` refused it as started (BullMQ counts
// the start), so the stale payload ran and the latest one went to the dead set. A job whose every start was a
// reschedule never ran: it is replaced.
describe('session 36: replace meeting a copy the reschedule strategy put back', () => {
  const { redis, start, keysOf } = useApps('s36-replace-rescheduled');

  /** A runs, held at its gate; B met A's run-time lock and was rescheduled (a minute), keeping its enqueue lock. */
  async function rescheduledCopy() {
    const gates = new Gates().hold('A');
    const app = await start({
      unique: {
        lock: 'until_and_while_executing',
        onConflict: { client: 'replace', server: 'reschedule' },
        rescheduleIn: 60_000,
        lockArgs: byId,
      },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    const events = new EventLog(app);
    const a = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'A' }));
    await gates.started('A');
    const b = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'B' }));
    await events.next((e) => e.type === 'rescheduled' && e.jobId === b.job.id);
    return { app, gates, a, b };
  }

  it('replaces the rescheduled copy: the latest payload runs after the holder, the stale one never', async () => {
    const { app, gates, a, b } = await rescheduledCopy();
    gates.release('A');
    await expect(app.finished(a.job)).resolves.toBe('ran:A');
    // B waits out its reschedule (a minute) holding the enqueue lock: C, the latest payload, takes its place.
    const c = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'C' }));
    expect(c.replacedJobId).toBe(b.job.id);
    expect(await app.queue.getJob(b.job.id!)).toBeUndefined();
    await expect(app.finished(c.job)).resolves.toBe('ran:C');
    expect(app.runs.map((job) => (job.data as { tag: string }).tag)).toEqual(['A', 'C']);
    expect(await app.service.deadSet.size()).toBe(0);
    expect(await keysOf(app)).toEqual([]);
  });

  it('keeps a copy that ran a step of its own before it was rescheduled (a start that ran its handler)', async () => {
    const { app, gates, a, b } = await rescheduledCopy();
    // One start more than reschedules counted: as a start that ran its handler (a step) or stalled leaves it.
    await redis.hincrby(`${bullPrefix()}:${app.queue.name}:${b.job.id}`, 'ats', 1);
    const c = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'C' }));
    expect(c).toMatchObject({ strategy: 'reject', existingJobId: b.job.id });
    expect(await app.queue.getJobState(b.job.id!)).toBe('delayed');
    await app.service.deadSet.delete(c.deadSetEntryId!);
    gates.release('A');
    await app.finished(a.job);
    await app.queue.remove(b.job.id!);
    expect(await keysOf(app)).toEqual([]);
  });
});

// A later step of a `while_executing` step job whose delivery took the run-time lock anew (the delivery before it
// crashed mid-step and the slot's lease ended; here the slot is dropped by hand) was no later step to the lock: when
// that attempt failed and BullMQ retried it after a backoff, the slot was given back, and a duplicate ran step 1 while
// the job waited between its steps. The steps a handler moved its job through are counted in the job (`ujSteps`), so
// such a delivery keeps the slot parked for the backoff as one that re-entered it does.
describe('session 36: a later step that took its run-time lock anew, failed and is retried', () => {
  const { redis, start } = useApps('s36-later-step');

  it('keeps the lock parked for the backoff: a duplicate meets it and does not run', async () => {
    const ran: string[] = [];
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      handler: stepHandler(ran, {
        delayMs: 60_000,
        next: () => Promise.reject(new Error('step 2 failed')),
      }),
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add(
      'sync',
      { id: 'a' },
      { jobId: uniqueName('step'), attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
    );
    await waitForParked(redis, running, runtimeOwner(app, first.id!));
    expect(await redis.zscore(running, runtimeOwner(app, first.id!))).not.toBeNull();
    // The parked slot is gone (its lease ended after a crash): the next delivery takes the lock anew.
    await redis.del(running);
    await (await app.queue.getJob(first.id!))!.promote();
    await waitFor('step 2 failed and is retried later', async () => {
      const job = await app.queue.getJob(first.id!);
      return job?.attemptsMade === 1 && (await job.getState()) === 'delayed';
    });
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    expect(await redis.zscore(running, runtimeOwner(app, first.id!))).not.toBeNull();
    const duplicate = await app.queue.add('sync', { id: 'a' });
    await expect(app.finished(duplicate.id!)).resolves.toBeNull(); // met the lock: logged, not run
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    await (await app.queue.getJob(first.id!))!.remove();
  }, 30_000);
});
