// Hostile review (session 35) of the BullMQ moves that do not pass through `queue.add`, job schedulers and flows
// (docs/how-locks-move.md). Each case failed before its fix, or says in a `BUG:` comment what it still shows wrong.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DelayedError, FlowProducer, WaitingChildrenError, Worker, type Job } from 'bullmq';
import { UniqueJobsReaper, type LockType } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { asDuplicate, byId, dedupHolder, digestOf, runningKey, runtimeOwner, waitForParked } from '../support/locks.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { byKey, stepStore, type StepStore } from '../support/step-stores.js';
import { stepHandler } from '../support/step-handler.js';
import { waitFor } from '../support/wait.js';
import { Outcomes } from '../support/outcomes.js';
import { isParkedScore } from '../../lib/locks/lock-marks.js';
import { workerOf } from '../conflicts/helpers.js';

const DAY_MS = 24 * 60 * 60 * 1000;

type StepData = { id: string; step?: number };

/** A two-step handler: notes `<job id>:<step>` in `ran`; step 1 stores the next step and parks the job for `parkMs`. */
function twoSteps(ran: string[], parkMs: number) {
  return stepHandler(ran, { delayMs: parkMs });
}

// A step job parks its run-time lock until it is due plus a lease (stepParkedMs; a day since session 51). A guarded
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
        handler: twoSteps(ran, lease),
      });
      const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
      const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('step') });
      await waitForParked(redis, running, runtimeOwner(app, first.id!));
      const parkedUntil = Number(await redis.zscore(running, runtimeOwner(app, first.id!)));
      const movedAt = Date.now();
      await (await app.queue.getJob(first.id!))!.changeDelay(60_000);
      // A day (parkedLeaseMs) past the new run time: later than the end the parked lock had before the move.
      const movedUntil = Number(await redis.zscore(running, runtimeOwner(app, first.id!)));
      expect(movedUntil).toBeGreaterThanOrEqual(movedAt + 60_000 + DAY_MS);
      expect(movedUntil).toBeGreaterThan(parkedUntil + 30_000);
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

// The same move, for the idempotency claim a step job hands over to its next delivery (step-handover.ts: kept until
// the job is due plus the key's `lease`). The guard moved neither: once the old handover ended, a duplicate claimed the
// key and ran step 1 while the first job waited for its step 2. The guard now hands the claim over again, to the same
// resume token, for a `lease` past the new run time (retimeHandover).
describe.each(['redis', 'sqlite', 'postgres'] as const)(
  'session 35: job.changeDelay of a parked step job (@IdempotencyKey, %s store)',
  (kind) => {
    const { start } = useApps(`s35-claim-delay-${kind}`);
    let sql: StepStore | undefined;

    beforeAll(async () => {
      if (kind !== 'redis') sql = await stepStore(kind);
    });
    afterAll(async () => sql?.close());

    it('a duplicate delivered after the old handover ended waits for the key; the first job runs its step 2', async () => {
      const lease = 500;
      const ran: string[] = [];
      const app = await start({
        ...(sql ? { module: { idempotency: { stores: { sql: sql.store } } } } : {}),
        idempotency: { key: byKey, lease, ...(sql ? { store: 'sql' } : {}) },
        handler: twoSteps(ran, lease),
      });
      const events = new EventLog(app);
      const first = await app.queue.add('charge', { key: 'k' });
      await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
      const handedOverAt = Date.now();
      await (await app.queue.getJob(first.id!))!.changeDelay(60_000);
      await waitFor('the old handover to pass', () => Date.now() > handedOverAt + 2 * lease + 50, 10_000);
      const duplicate = await app.queue.add('charge', { key: 'k' });
      const seen = await Promise.race([
        events.next((e) => e.type === 'idempotencyInProgress' && e.jobId === duplicate.id),
        events.next((e) => e.type === 'idempotencyClaimed' && e.jobId === duplicate.id),
      ]);
      expect(seen.type).toBe('idempotencyInProgress');
      expect(ran).toEqual([`${first.id}:1`]);
      await (await app.queue.getJob(first.id!))!.promote();
      await expect(app.finished(first.id!)).resolves.toBe('done');
      await expect(app.finished(duplicate.id!)).resolves.toBe('done'); // replayed
      expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    }, 30_000);
  },
);

// BullMQ removes a parent waiting for its children when `drain`, `clean` or `obliterate` removes its last child of the
// same queue (removeParentDependencyKey, hard): it deletes the parent's job keys and then `de:<deid>` of the CHILD's
// deduplication id (BullMQ 6.7 reads `deid` from the child's hash), not the parent's. The parent's fast-path enqueue
// lock is left behind its job. Without a TTL it is stale (BullMQ's next add and the library's peek take it for free);
// with `lockTtl` it names a job that no longer exists until the orphan reaper's pass (or the TTL).
describe('session 35: drain removes a unique parent with its last child (fast path, lockTtl)', () => {
  const { redis, start } = useApps('s35-drain-parent');

  it("the parent's deduplication key outlives it: duplicates are refused, naming a gone job, until the reaper", async () => {
    const ref: { app?: TestApp } = {};
    const app = (ref.app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: { lock: 'until_executed', lockArgs: byId, jobName: 'sync', lockTtl: 600_000 },
      handler: async (job: Job<{ id: string }>) => {
        if (job.name !== 'sync') return 'child';
        const parent = { id: job.id!, queue: job.queueQualifiedName };
        await ref.app!.queue.add('child', { id: 'c' }, { parent, delay: 600_000 });
        if (await job.moveToWaitingChildren(job.token!)) throw new WaitingChildrenError();
        return 'parent done';
      },
    }));
    const digest = digestOf(app, 'sync', { id: 'a' });
    const first = await app.queue.add('sync', { id: 'a' });
    await waitFor('the parent to wait for its child', async () => (await first.getState()) === 'waiting-children');
    await app.queue.drain(true);
    expect(await app.queue.getJob(first.id!)).toBeUndefined(); // BullMQ removed the parent with its last child
    // BUG (BullMQ's, fast path with lockTtl): the key still names the removed parent; a new job of the digest is a
    // duplicate of a job that does not exist. docs/how-locks-move.md says so now (it claimed the fast path had no gap).
    expect(await dedupHolder(redis, app.queue.name, digest)).toBe(first.id);
    expect(asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'a' })).existingJobId).toBe(first.id);
    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    expect(report.reaped.deduplicationKeys).toBe(1);
    expect(await dedupHolder(redis, app.queue.name, digest)).toBeNull();
    expect((await app.service.enqueue(app.queue, 'sync', { id: 'a' })).status).toBe('enqueued');
  }, 30_000);
});

// Controls for the rows "FlowProducer jobs (add, addBulk: the root and every child)" and "job schedulers" of
// docs/how-locks-move.md: no enqueue lock, the run-time lock applies. Kept as controls (they passed as they are).
describe('session 35: flows and job schedulers under run-time locks (controls)', () => {
  const { redis, start, keysOf, onCleanup } = useApps('s35-bypass');

  it('FlowProducer.addBulk roots of one digest (until_and_while_executing): one runs, the other is rescheduled, then runs', async () => {
    const gates = new Gates().hold('a', 'b');
    const app = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId, jobName: 'sync', rescheduleIn: 50 },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    const events = new EventLog(app);
    const flows = new FlowProducer(bullOptions());
    onCleanup(() => flows.close());
    const [fa, fb] = await flows.addBulk(
      ['a', 'b'].map((tag) => ({ name: 'sync', queueName: app.queue.name, data: { id: 'x', tag } })),
    );
    // No enqueue lock for either (the run-time lock may be taken already).
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: 'x' }))).toBeNull();
    const firstTag = await Promise.race(['a', 'b'].map(async (tag) => (await gates.started(tag), tag)));
    const [first, second] = firstTag === 'a' ? [fa.job, fb.job] : [fb.job, fa.job];
    await events.next((e) => e.type === 'rescheduled' && e.jobId === second.id);
    expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    gates.release(firstTag);
    await expect(app.finished(first.id!)).resolves.toBe(`ran:${firstTag}`);
    gates.releaseAll();
    await expect(app.finished(second.id!)).resolves.toMatch(/^ran:/);
    expect(app.runs.map((job) => job.id)).toEqual([first.id, second.id]);
    expect(await keysOf(app)).toEqual([]);
  }, 30_000);

  it('job schedulers of one digest on a while_executing queue: an iteration meeting a running one ends through log', async () => {
    const gates = new Gates().hold('s');
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    const events = new EventLog(app);
    onCleanup(async () => {
      await app.queue.removeJobScheduler('s35-one');
      await app.queue.removeJobScheduler('s35-two');
    });
    const template = { name: 'sync', data: { id: 'x', tag: 's' } };
    await app.queue.upsertJobScheduler('s35-one', { every: 3_600_000 }, template);
    const running = await gates.started('s');
    await app.queue.upsertJobScheduler('s35-two', { every: 3_600_000 }, template);
    const met = await events.next((e) => e.type === 'duplicate' && e.side === 'server');
    expect(met).toMatchObject({ existingJobId: running.id });
    expect(app.runs).toHaveLength(1);
    gates.releaseAll();
    await expect(app.finished(running.id!)).resolves.toBe('ran:s');
    expect(await keysOf(app)).toEqual([]);
  }, 30_000);
});

// A later step of a step job that fails and is retried: BullMQ delays it (backoff), its data already says "step 2".
// The idempotency claim is handed over for the backoff (session 34: "lest a duplicate run from the first step
// meanwhile"), but the run-time lock was given back as after any failed attempt, so a duplicate started from step 1
// between the first job's steps. Now an attempt that re-entered a parked slot (acquireLock answers it) and fails with
// a retry parks R for BullMQ's backoff plus runtimeLockLease (JobRun.parkForRetry).
describe('session 35: a later step of a while_executing step job fails and is retried', () => {
  const { redis, start } = useApps('s35-step-retry');

  it('R stays the job’s for the backoff: a duplicate meets it, the first job retries its step 2', async () => {
    const ran: string[] = [];
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      handler: stepHandler(ran, {
        delayMs: 0,
        next: async (job) => {
          if (job.attemptsMade === 0 && job.opts.attempts === 2) throw new Error('step 2 fails once');
          return 'done';
        },
      }),
    });
    const outcomes = new Outcomes(workerOf(app));
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add(
      'sync',
      { id: 'a' },
      { jobId: uniqueName('first'), attempts: 2, backoff: 60_000 },
    );
    await outcomes.failures(first.id!);
    const failedAt = Date.now();
    expect(await first.getState()).toBe('delayed');
    expect(Number(await redis.zscore(running, runtimeOwner(app, first.id!)))).toBeGreaterThanOrEqual(
      failedAt + 60_000 - 1_000,
    );
    const duplicate = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('dup') });
    await expect(outcomes.completed(duplicate.id!)).resolves.toBeUndefined(); // met R: `log`, its handler never ran
    await (await app.queue.getJob(first.id!))!.promote();
    await expect(outcomes.completed(first.id!)).resolves.toBe('done');
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`, `${first.id}:2`]);
    expect(await redis.exists(running)).toBe(0);
  }, 30_000);

  it('a later step that is rate limited keeps R parked while it waits to run again', async () => {
    const ref: { app?: TestApp } = {};
    const app = (ref.app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: async (job: Job<StepData>) => {
        if ((job.data.step ?? 1) === 1) {
          await job.updateData({ ...job.data, step: 2 });
          await job.moveToDelayed(Date.now(), job.token);
          throw new DelayedError();
        }
        await ref.app!.worker!.rateLimit(60_000);
        throw Worker.RateLimitError();
      },
    }));
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('limited') });
    await waitFor(
      'step 2 to be rate limited',
      async () => (await first.getState()) === 'waiting' && app.runs.length === 2,
    );
    // Parked (the mark no take draws), not given back: a duplicate started meanwhile would meet it.
    await waitFor('R parked', async () =>
      isParkedScore(Number(await redis.zscore(running, runtimeOwner(app, first.id!)))),
    );
  }, 30_000);

  it('a first step that fails and is retried gives R back (control: nothing was resumed)', async () => {
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: async (job: Job<StepData>) => {
        if (job.attemptsMade === 0) throw new Error('fails once');
        return 'done';
      },
    });
    const outcomes = new Outcomes(workerOf(app));
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a' }, { attempts: 2, backoff: 60_000 });
    await outcomes.failures(first.id!);
    expect(await redis.exists(running)).toBe(0);
  }, 30_000);
});
