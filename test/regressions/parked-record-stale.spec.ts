// A step job under @IdempotencyKey hands its claim over to its next delivery for a day past its run time (session 51).
// Removed without the library in between (a dashboard, a plain BullMQ client, remove-and-add to reschedule), or failed
// for good while no worker of the library heard of it, nothing settled that record on a SQL store (the orphan reaper
// frees Redis records only, and runs on an interval): every other delivery of the key waited, looking again every
// `lease`, for that day. Session 52: a delivery that meets such a record reads the job it was parked for, where the
// step's mark in the library's Redis says it lives, and settles the record as that job's end would have (released;
// kept failed with `onFailure: 'keep'`), then is tried again at once. A record this Redis holds no mark of (another
// deployment sharing the SQL store) is left to its lease.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { parkedJobElsewhere, parkThenRemove, parkingOptions } from '../support/parking-app.js';
import { EventLog } from '../support/events.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { stepStore, type StepStore } from '../support/step-stores.js';

describe.each(['redis', 'sqlite', 'postgres'] as const)(
  'a record handed over to a step job that will not come back for it (%s store)',
  (kind) => {
    const { start, onCleanup } = useApps(`parked-stale-${kind}`);
    let sql: StepStore | undefined;
    beforeAll(async () => {
      if (kind !== 'redis') sql = await stepStore(kind);
    });
    afterAll(async () => sql?.close());

    /** An app whose step jobs park for an hour between their steps, its reaper off (only a claim frees a record). */
    async function parkingApp(ran: string[], extra: object = {}): Promise<{ app: TestApp; plain: Queue }> {
      const app = await start(parkingOptions(sql, ran, { idempotency: extra }));
      const plain = new Queue(app.queue.name, bullOptions());
      onCleanup(() => plain.close());
      return { app, plain };
    }

    it('whose job was removed without the library: a duplicate releases it and runs', async () => {
      const ran: string[] = [];
      const { app } = await parkingApp(ran);
      const first = await parkThenRemove(app, 'k');
      const events = new EventLog(app);
      const duplicate = await app.queue.add('charge', { key: 'k' });
      await expect(app.finished(duplicate)).resolves.toBe('fresh');
      await events.next((e) => e.type === 'idempotencyReleased' && e.jobId === first);
      expect(ran).toEqual([`${first}:1`, `${duplicate.id}:fresh`]);
    }, 30_000);

    it('whose job id was given to a new job (remove and add): the new job releases it and runs', async () => {
      const ran: string[] = [];
      const { app, plain } = await parkingApp(ran);
      const events = new EventLog(app);
      const first = await app.queue.add('charge', { key: 'k', steps: true }, { jobId: `step-${kind}` });
      await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
      await (await plain.getJob(first.id!))!.remove();
      const again = await app.queue.add('charge', { key: 'k' }, { jobId: first.id });
      await expect(app.finished(again)).resolves.toBe('fresh');
      expect(ran).toEqual([`${first.id}:1`, `${first.id}:fresh`]);
    }, 30_000);

    it('whose job a worker without the library failed for good: kept failed (onFailure keep), replayed', async () => {
      const ran: string[] = [];
      const { app, plain } = await parkingApp(ran, { onFailure: 'keep' });
      const events = new EventLog(app);
      const first = await app.queue.add('charge', { key: 'k', steps: true });
      await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
      // The library's worker is away; a plain BullMQ worker takes the parked job and fails it for good.
      const stranger = await parkedJobElsewhere(app, first.id!);
      onCleanup(() => stranger.close());
      const taken = await stranger.getNextJob('stranger');
      expect(taken.id).toBe(first.id);
      await taken.moveToFailed(new Error('disk full'), 'stranger', true);
      expect(await (await plain.getJob(first.id!))!.getState()).toBe('failed');
      await app.worker!.resume();
      const duplicate = await app.queue.add('charge', { key: 'k' });
      await expect(app.finished(duplicate)).rejects.toThrow(/disk full/);
      await events.next((e) => e.type === 'idempotencyFailureKept' && e.jobId === first.id);
      expect(ran).toEqual([`${first.id}:1`]);
    }, 30_000);

    it('whose job is still parked: a duplicate waits', async () => {
      const ran: string[] = [];
      const { app } = await parkingApp(ran);
      const events = new EventLog(app);
      const first = await app.queue.add('charge', { key: 'k', steps: true });
      await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
      const duplicate = await app.queue.add('charge', { key: 'k' });
      // It looks again every lease (200 ms): twice in progress, still nothing released.
      const looks = () => events.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id).length;
      await events.next(() => looks() >= 2);
      expect(events.of('idempotencyReleased')).toEqual([]);
      expect(await (await app.queue.getJob(first.id!))!.getState()).toBe('delayed');
      expect(ran).toEqual([`${first.id}:1`]);
    }, 30_000);
  },
);

describe('a record handed over under a scope shared by two queues (sqlite store)', () => {
  const { start } = useApps('parked-stale-shared');
  let sql: StepStore;
  beforeAll(async () => {
    sql = await stepStore('sqlite');
  });
  afterAll(async () => sql?.close());

  /** An app of its own queue, under the scope `shared`, its module prefix `prefix` (one per deployment). */
  async function sharingApp(ran: string[], prefix: string): Promise<TestApp> {
    const options = { module: { prefix }, idempotency: { scope: 'shared' }, handler: { queueInRun: true } };
    return start(parkingOptions(sql, ran, options));
  }

  it('one deployment (one module prefix): a duplicate in the other queue settles it and runs', async () => {
    const ran: string[] = [];
    const a = await sharingApp(ran, uniqueName('ujt-one'));
    const b = await sharingApp(ran, a.prefix);
    const first = await parkThenRemove(a, 'one');
    const events = new EventLog(b);
    const duplicate = await b.queue.add('pay', { key: 'one' });
    await expect(b.finished(duplicate)).resolves.toBe('fresh');
    // Named as the parked job (its queue and name, from its mark), not as the delivery that settled it (review
    // helper-165: 5817fd2 named b's queue with a's job id).
    const released = await events.next((e) => e.type === 'idempotencyReleased');
    expect(released).toEqual(expect.objectContaining({ queue: a.queue.name, jobName: 'charge', jobId: first }));
    expect(ran).toEqual([`${first}:1`, `${b.queue.name}:${duplicate.id}:fresh`]);
  }, 30_000);

  it('a deployment that cannot see the job (another module prefix, as another Redis): a duplicate waits', async () => {
    const ran: string[] = [];
    const a = await sharingApp(ran, uniqueName('ujt-here'));
    const b = await sharingApp(ran, uniqueName('ujt-there'));
    const events = new EventLog(b);
    const first = await parkThenRemove(a, 'two');
    const duplicate = await b.queue.add('charge', { key: 'two' });
    const looks = () => events.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id).length;
    await events.next(() => looks() >= 2);
    expect(events.of('idempotencyReleased')).toEqual([]);
    expect(ran).toEqual([`${first}:1`]);
  }, 30_000);
});
