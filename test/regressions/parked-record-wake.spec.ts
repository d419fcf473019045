// Carried Left 5 of session 52: a delivery that met a record parked between two steps of its job waits in delayed and
// looks again within a `lease` (no process holds a parked record, so no holder wakes it). When the record was settled
// for a job that will not come back for it (a later delivery found the job removed; the worker's `failed` event; the
// orphan reaper), those deliveries kept waiting for that lease. Session 53: whoever settles such a record tells every
// process, which wakes the deliveries it delayed for it. The lease here is a minute and the tests' timeout 30 s: a
// delivery that is not woken fails its test.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DelayedError, Queue, type Job } from 'bullmq';
import { UniqueJobsReaper } from '../../lib/index.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { HOUR_MS, parkingOptions, type parkingHandler } from '../support/parking-app.js';
import { bullOptions } from '../support/redis.js';
import type { StepData } from '../support/step-handler.js';
import { stepStore, type StepStore } from '../support/step-stores.js';

const LEASE_MS = 60_000;

describe.each(['redis', 'sqlite'] as const)('deliveries waiting for a parked record settled (%s store)', (kind) => {
  const { start, onCleanup } = useApps(`parked-wake-${kind}`);
  let sql: StepStore | undefined;
  beforeAll(async () => {
    if (kind !== 'redis') sql = await stepStore(kind);
  });
  afterAll(async () => sql?.close());

  async function parkingApp(
    ran: string[],
    more: Partial<TestAppOptions> = {},
    extra: { grace?: number; handler?: Parameters<typeof parkingHandler>[1] } = {},
  ): Promise<TestApp> {
    const reaper = { interval: false, ...(extra.grace === undefined ? {} : { grace: extra.grace }) };
    const options = parkingOptions(sql, ran, {
      idempotency: { lease: LEASE_MS },
      module: { reaper },
      ...(extra.handler ? { handler: extra.handler } : {}),
    });
    return start({ ...options, ...more });
  }

  it('by a later delivery that found its job removed: the one waiting runs at once too', async () => {
    const ran: string[] = [];
    const app = await parkingApp(ran);
    const { first, waiting } = await waitingThenRemoved(app, onCleanup);
    await outliveAnnouncement();
    const later = await app.queue.add('charge', { key: 'k' });
    await expect(app.finished(later)).resolves.toBe('fresh');
    await expect(app.finished(waiting)).resolves.toBe('fresh'); // replayed, or ran first and the later one replayed
    expectOneRan(ran, first, [waiting, later]);
  }, 30_000);

  it("by the worker's failed event (failed for good without its processor): the one waiting runs", async () => {
    const ran: string[] = [];
    // The step job parks twice (its second step moves it an hour ahead again); its third delivery is failed by BullMQ
    // without calling the processor (maxStartedAttempts 2). The waiting duplicate is started twice: allowed.
    const parkAgain = async (job: Job<StepData>) => {
      await job.moveToDelayed(Date.now() + HOUR_MS, job.token);
      throw new DelayedError();
    };
    const app = await parkingApp(ran, { worker: { maxStartedAttempts: 2 } }, { handler: { next: parkAgain } });
    const events = new EventLog(app);
    const first = await app.queue.add('charge', { key: 'k', steps: true });
    const parked = () => events.of('idempotencyHandedOver').filter((e) => e.jobId === first.id).length;
    await events.next(() => parked() === 1);
    await (await app.queue.getJob(first.id!))!.promote();
    await events.next(() => parked() === 2);
    const waiting = await waitingDuplicate(app, events, 'k');
    await (await app.queue.getJob(first.id!))!.promote();
    await expect(app.finished(first)).rejects.toThrow(/started more than allowable limit/);
    await expect(app.finished(waiting)).resolves.toBe('fresh');
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`, `${waiting.id}:fresh`]);
  }, 30_000);

  if (kind === 'redis') {
    it('by the orphan reaper (its job removed): the one waiting runs', async () => {
      const ran: string[] = [];
      const app = await parkingApp(ran, {}, { grace: 0 });
      const { first, waiting } = await waitingThenRemoved(app, onCleanup);
      const report = await app.moduleRef.get(UniqueJobsReaper).run();
      expect(report.reaped.idempotencyClaims).toBe(1);
      await expect(app.finished(waiting)).resolves.toBe('fresh');
      expect(ran).toEqual([`${first.id}:1`, `${waiting.id}:fresh`]);
    }, 30_000);
  }
});

describe('a delivery another module delayed, waiting for a parked record settled (sqlite store)', () => {
  const { start, onCleanup } = useApps('parked-wake-apart');
  let sql: StepStore;
  beforeAll(async () => {
    sql = await stepStore('sqlite');
  });
  afterAll(async () => sql?.close());

  it('is woken by the module that settled it (the channel every process listens to)', async () => {
    const ran: string[] = [];
    const options = (module: object) => parkingOptions(sql, ran, { idempotency: { lease: LEASE_MS }, module });
    // Two modules on one queue, as two processes: `a` delays the waiting duplicate, `b` settles the record.
    const a = await start(options({}));
    const b = await start({ ...options({ prefix: a.prefix }), queue: a.queue.name });
    await b.worker!.pause();
    const { first, waiting } = await waitingThenRemoved(a, onCleanup);
    await a.worker!.pause();
    await b.worker!.resume();
    await outliveAnnouncement();
    const settledBy = new EventLog(b);
    const later = await b.queue.add('charge', { key: 'k' });
    await settledBy.next((e) => e.type === 'idempotencyReleased' && e.jobId === first.id);
    await expect(b.finished(later)).resolves.toBe('fresh');
    await expect(b.finished(waiting)).resolves.toBe('fresh');
    expectOneRan(ran, first, [waiting, later]);
  }, 30_000);
});

/**
 * Lets the waiting duplicate's announcement age past what a later holder of the key adopts (`PENDING_MS` of
 * waiting-duplicates.ts, 2 s): a holder claiming within 2 s of it wakes it when it settles, which would hide the
 * settle's own wake. A step parks for hours in life; this wait is the condition under test, not a wait for an event.
 */
async function outliveAnnouncement(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 2_100));
}

/**
 * `ran`: the parked job's first step, then one of `duplicates` (woken, the waiting one may claim before the later one
 * is delivered again; the other replays).
 */
function expectOneRan(ran: string[], first: Job, duplicates: Job[]): void {
  expect(ran).toHaveLength(2);
  expect(ran[0]).toBe(`${first.id}:1`);
  expect(duplicates.map((job) => `${job.id}:fresh`)).toContain(ran[1]);
}

/**
 * On `app`: a step job of key `k` parks its record, a duplicate meets it and waits (`waitingDuplicate`), then the step
 * job is removed with a plain BullMQ client, without the library.
 */
async function waitingThenRemoved(
  app: TestApp,
  onCleanup: (cleanup: () => Promise<void>) => void,
): Promise<{ first: Job; waiting: Job }> {
  const events = new EventLog(app);
  const first = await app.queue.add('charge', { key: 'k', steps: true });
  await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
  const waiting = await waitingDuplicate(app, events, 'k');
  const plain = new Queue(app.queue.name, bullOptions());
  onCleanup(() => plain.close());
  await (await plain.getJob(first.id!))!.remove();
  events.stop();
  return { first, waiting };
}

/** Adds a duplicate of key `key` to `app` and resolves it once it met the parked record and waits (delayed). */
async function waitingDuplicate(app: TestApp, events: EventLog, key: string): Promise<Job> {
  const waiting = await app.queue.add('charge', { key });
  await events.next((e) => e.type === 'idempotencyInProgress' && e.jobId === waiting.id && e.action === 'delayed');
  expect(await (await app.queue.getJob(waiting.id!))!.getState()).toBe('delayed');
  return waiting;
}
