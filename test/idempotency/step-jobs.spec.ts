// BullMQ's step jobs under @IdempotencyKey (plain mode): a step moves its own job (`moveToDelayed` + `DelayedError`,
// `moveToWaitingChildren` + `WaitingChildrenError`) and ends the attempt without settling the key. The claim is handed
// over to the job's next delivery: a duplicate of the key delivered while the job waits between two steps waits too,
// then replays the job's result; it never runs the handler from its first step (found by a review in session 33: the
// claim was released, and the duplicate ran step 1 a second time).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DelayedError, WaitingChildrenError, type Job } from 'bullmq';
import { RedisIdempotencyStore, UniqueJobsReaper } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Outcomes } from '../support/outcomes.js';
import { workerOf } from '../conflicts/helpers.js';
import { byKey, stepStore, type StepStore, type Steps } from '../support/step-stores.js';
import type { TestApp } from '../support/app.js';

/** A two-step handler: step 1 counts its effect, stores the next step and parks the job in delayed for `parkMs`. */
function twoSteps(effects: string[], parkMs: number) {
  return async (job: Job) => {
    const data = job.data as Steps;
    if ((data.step ?? 1) === 1) {
      effects.push(`step1:${job.id}`);
      await job.updateData({ ...data, step: 2 });
      await job.moveToDelayed(Date.now() + parkMs, job.token);
      throw new DelayedError();
    }
    effects.push(`step2:${job.id}`);
    return `done by ${job.id}`;
  };
}

describe.each(['redis', 'postgres', 'sqlite'] as const)('@IdempotencyKey step jobs (%s store)', (kind) => {
  const { start, redis } = useApps(`step-jobs-${kind}`);
  let sql: StepStore | undefined;

  beforeAll(async () => {
    if (kind !== 'redis') sql = await stepStore(kind);
  });
  afterAll(async () => sql?.close());

  const startWith = (handler: (job: Job) => Promise<unknown>, lease = 30_000) =>
    start({
      // The reaper runs on demand, with no grace (the test removes the job before the run, never during it).
      module: {
        reaper: { interval: false, grace: 0 },
        ...(sql ? { idempotency: { stores: { sql: sql.store } } } : {}),
      },
      idempotency: { key: byKey, lease, ...(sql ? { store: 'sql' } : {}) },
      worker: { concurrency: 2 },
      handler,
    });

  it('a duplicate added while the job waits between two steps waits, then replays: step 1 ran once', async () => {
    const effects: string[] = [];
    // Parked long enough that the duplicate is surely delivered while the job waits (it is promoted by hand below).
    const app = await startWith(twoSteps(effects, 60_000));
    const events = new EventLog(app);
    const outcomes = new Outcomes(workerOf(app));
    const handedOver = events.next((event) => event.type === 'idempotencyHandedOver');
    const first = await app.queue.add('charge', { key: 'k' });
    expect(await handedOver).toMatchObject({ jobId: first.id, step: 'DelayedError' });
    expect(await app.queue.getJobState(first.id!)).toBe('delayed');

    const waited = events.next((event) => event.type === 'idempotencyInProgress');
    const duplicate = await app.queue.add('charge', { key: 'k' });
    expect(await waited).toMatchObject({ jobId: duplicate.id, action: 'delayed', holderJobId: first.id });
    expect(effects).toEqual([`step1:${first.id}`]);

    await (await app.queue.getJob(first.id!))!.promote();
    expect(await outcomes.completed(first.id!)).toBe(`done by ${first.id}`);
    // The duplicate waits at most a lease (30 s here): promote it rather than wait for it.
    await (await app.queue.getJob(duplicate.id!))?.promote().catch(() => undefined);
    expect(await outcomes.completed(duplicate.id!)).toBe(`done by ${first.id}`);
    expect(effects).toEqual([`step1:${first.id}`, `step2:${first.id}`]);
  }, 30_000);

  it('the job resumes its own parked claim at once, even with its data changed by the step', async () => {
    const effects: string[] = [];
    const app = await startWith(twoSteps(effects, 50));
    const events = new EventLog(app);
    const outcomes = new Outcomes(workerOf(app));
    const job = await app.queue.add('charge', { key: 'k2' });
    expect(await outcomes.completed(job.id!)).toBe(`done by ${job.id}`);
    expect(effects).toEqual([`step1:${job.id}`, `step2:${job.id}`]);
    // Two claims, neither a takeover: nobody died mid-run (the resumed one is no crash recovery).
    const claims = events.events.filter((event) => event.type === 'idempotencyClaimed' && event.jobId === job.id);
    expect(claims).toEqual([
      expect.objectContaining({ takeover: false }),
      expect.objectContaining({ takeover: false }),
    ]);
    // A later job of the same payload replays (the record kept the fingerprint the producer sent).
    const later = await app.queue.add('charge', { key: 'k2' });
    expect(await outcomes.completed(later.id!)).toBe(`done by ${job.id}`);
    expect(effects).toHaveLength(2);
  }, 30_000);

  it('a later step that fails and is retried keeps the claim: a duplicate during the backoff waits', async () => {
    const effects: string[] = [];
    const app = await startWith(async (job: Job) => {
      const data = job.data as Steps;
      if ((data.step ?? 1) === 1) {
        effects.push(`step1:${job.id}`);
        await job.updateData({ ...data, step: 2 });
        await job.moveToDelayed(Date.now(), job.token);
        throw new DelayedError();
      }
      effects.push(`step2:${job.id}`);
      if (job.attemptsMade === 0) throw new Error('step 2 fails once');
      return `done by ${job.id}`;
    });
    const events = new EventLog(app);
    const outcomes = new Outcomes(workerOf(app));
    const retried = events.next((event) => event.type === 'idempotencyHandedOver' && event.step === 'Error');
    // Its retry waits a minute (promoted by hand below): the duplicate comes meanwhile.
    const first = await app.queue.add('charge', { key: 'k4' }, { attempts: 2, backoff: 60_000 });
    expect(await retried).toMatchObject({ jobId: first.id });
    // (On a SQL store the job's own next delivery may meet its claim before the step handed it over, and wait too.)
    const duplicate = await app.queue.add('charge', { key: 'k4' });
    const waited = events.next((event) => event.type === 'idempotencyInProgress' && event.jobId === duplicate.id);
    expect(await waited).toMatchObject({ action: 'delayed' });
    await (await app.queue.getJob(first.id!))!.promote();
    expect(await outcomes.completed(first.id!)).toBe(`done by ${first.id}`);
    await (await app.queue.getJob(duplicate.id!))?.promote().catch(() => undefined);
    expect(await outcomes.completed(duplicate.id!)).toBe(`done by ${first.id}`);
    expect(effects).toEqual([`step1:${first.id}`, `step2:${first.id}`, `step2:${first.id}`]);
  }, 30_000);

  if (kind === 'redis') {
    it('a parent waiting for its children keeps its key; the reaper releases it once the parent is removed', async () => {
      const started: { app?: TestApp } = {};
      const app = await startWith(async (job: Job) => {
        // A child due in a minute: the parent waits for it.
        const parent = { id: job.id!, queue: job.queueQualifiedName };
        await started.app!.queue.add('child', { key: 'child' }, { delay: 60_000, parent });
        if (await job.moveToWaitingChildren(job.token!)) throw new WaitingChildrenError();
        return 'parent done';
      });
      started.app = app;
      const events = new EventLog(app);
      const handedOver = events.next((event) => event.type === 'idempotencyHandedOver');
      const parent = await app.queue.add('charge', { key: 'k3' });
      expect(await handedOver).toMatchObject({ jobId: parent.id, step: 'WaitingChildrenError' });
      expect(await app.queue.getJobState(parent.id!)).toBe('waiting-children');
      const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
      const scope = `${app.queue.name}:charge`;
      expect((await store.get(scope, 'k3'))?.owner).toMatch(/^step:/);
      // Kept while the parent waits.
      expect((await app.moduleRef.get(UniqueJobsReaper).run()).reaped.idempotencyClaims).toBe(0);
      expect(await store.get(scope, 'k3')).toBeDefined();

      await (await app.queue.getJob(parent.id!))!.remove({ removeChildren: true });
      expect((await app.moduleRef.get(UniqueJobsReaper).run()).reaped.idempotencyClaims).toBe(1);
      expect(await store.get(scope, 'k3')).toBeUndefined();
    }, 30_000);
  }
});

// Transactional mode: the step's writes (through the handler's transaction) commit with the record handed over,
// rather than rolling back while `job.updateData` has already stored the next step.
describe.each(['postgres', 'sqlite'] as const)('@IdempotencyKey step jobs, transactional (%s store)', (kind) => {
  const { start } = useApps(`step-jobs-tx-${kind}`);
  let sql: StepStore;

  beforeAll(async () => {
    sql = await stepStore(kind);
  });
  afterAll(async () => sql.close());

  it('the step commits its writes with the claim handed over; a duplicate waits and replays; step 1 ran once', async () => {
    const app = await start({
      module: { idempotency: { stores: { sql: sql.store } } },
      idempotency: { key: byKey, store: 'sql', transactional: true },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        const data = job.data as Steps;
        if ((data.step ?? 1) === 1) {
          await sql.write(job, `step1:${job.id}`);
          await job.updateData({ ...data, step: 2 });
          await job.moveToDelayed(Date.now() + 60_000, job.token);
          throw new DelayedError();
        }
        await sql.write(job, `step2:${job.id}`);
        return `done by ${job.id}`;
      },
    });
    const events = new EventLog(app);
    const outcomes = new Outcomes(workerOf(app));
    const handedOver = events.next((event) => event.type === 'idempotencyHandedOver');
    const first = await app.queue.add('charge', { key: 'k' });
    expect(await handedOver).toMatchObject({ jobId: first.id, step: 'DelayedError' });
    expect(await sql.written()).toEqual([`step1:${first.id}`]);

    const waited = events.next((event) => event.type === 'idempotencyInProgress');
    const duplicate = await app.queue.add('charge', { key: 'k' });
    expect(await waited).toMatchObject({ jobId: duplicate.id, action: 'delayed' });

    await (await app.queue.getJob(first.id!))!.promote();
    expect(await outcomes.completed(first.id!)).toBe(`done by ${first.id}`);
    await (await app.queue.getJob(duplicate.id!))?.promote().catch(() => undefined);
    expect(await outcomes.completed(duplicate.id!)).toBe(`done by ${first.id}`);
    expect(await sql.written()).toEqual([`step1:${first.id}`, `step2:${first.id}`]);
  }, 30_000);
});
