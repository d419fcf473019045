// Review helper rv52 of session 52's settleStaleHandover (a delivery meeting a record parked for a step job that will
// not come back for it settles it): what the one HMGET of the job the record names misreads.
//
// A. A job BullMQ *completed* keeps the `failedReason` of an earlier attempt it retried (moveToFinished writes
//    `returnvalue` and `finishedOn`, and deletes nothing): with `onFailure: 'keep'` such a job's record was kept
//    failed, and every duplicate replayed a failure of a job that succeeded.
// B. PostgreSQL stores a job id holding NUL with the NUL escaped (`\u0000` as text): the job the record names was read
//    under a key that is not its own, found gone, and the record of a live parked job released: a duplicate ran the
//    effect from its first step while the job waited for its second.
// C. `bull` and `{bull}` are one prefix to the default scope (a queue of each, one name, share a scope) but two
//    queues to BullMQ: a delivery of one read the other's parked job where it is not, and released its record.
// Fixed by reading the job where the step's mark (ParkedRecordMarks) says it lives (B, C) and taking a finished job for
// failed only when it is in its queue's `failed` set (A).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { parkedJobElsewhere, parkingOptions } from '../support/parking-app.js';
import { EventLog } from '../support/events.js';
import { bullOptions, deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { stepStore, type StepStore } from '../support/step-stores.js';

type Kind = 'redis' | 'sqlite' | 'postgres';

function parkingSuite(kind: Kind, label: string) {
  const { start, onCleanup } = useApps(`${label}-${kind}`);
  let sql: StepStore | undefined;
  beforeAll(async () => {
    if (kind !== 'redis') sql = await stepStore(kind);
  });
  afterAll(async () => sql?.close());

  /** An app whose step jobs park for an hour between their steps, its reaper off (only a claim frees a record). */
  async function parkingApp(
    ran: string[],
    extra: object = {},
    app: { queue?: string; queueOptions?: object; prefix?: string } = {},
  ): Promise<{ app: TestApp; plain: Queue }> {
    const { prefix, ...queue } = app;
    const module = prefix ? { prefix } : {};
    const started = await start({ ...queue, ...parkingOptions(sql, ran, { idempotency: extra, module }) });
    const plain = new Queue(started.queue.name, bullOptions());
    onCleanup(() => plain.close());
    return { app: started, plain };
  }
  return { parkingApp, onCleanup };
}

describe.each(['redis', 'sqlite', 'postgres'] as const)('rv52 A: a parked job completed after a retry (%s)', (kind) => {
  const { parkingApp, onCleanup } = parkingSuite(kind, 'rv52a');

  it('completed on a worker without the library after one failed attempt: released, not kept failed', async () => {
    const ran: string[] = [];
    const { app, plain } = await parkingApp(ran, { onFailure: 'keep' });
    const events = new EventLog(app);
    const first = await app.queue.add('charge', { key: 'k', steps: true }, { attempts: 3 });
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const stranger = await parkedJobElsewhere(app, first.id!);
    onCleanup(() => stranger.close());
    // Its step 2 fails once (retried at once: attempts left), then succeeds: BullMQ completed it.
    const taken = await stranger.getNextJob('stranger');
    expect(taken.id).toBe(first.id);
    await taken.moveToFailed(new Error('flaky network'), 'stranger', false);
    const again = await stranger.getNextJob('stranger2');
    expect(again.id).toBe(first.id);
    await again.moveToCompleted('step 2 done', 'stranger2', false);
    expect(await (await plain.getJob(first.id!))!.getState()).toBe('completed');
    await app.worker!.resume();
    const duplicate = await app.queue.add('charge', { key: 'k' });
    // The job succeeded: nothing failed to keep (96feb48: IdempotencyKeyFailedError "flaky network").
    await expect(app.finished(duplicate)).resolves.toBe('fresh');
    expect(events.of('idempotencyFailureKept')).toEqual([]);
  }, 30_000);
});

describe('rv52 B: a parked job whose id holds NUL (postgres)', () => {
  const { parkingApp } = parkingSuite('postgres', 'rv52b');

  it('still parked: a duplicate waits (its record is not released)', async () => {
    const ran: string[] = [];
    const { app } = await parkingApp(ran);
    const events = new EventLog(app);
    const first = await app.queue.add('charge', { key: 'k', steps: true }, { jobId: 'order\u0000 1' });
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const duplicate = await app.queue.add('charge', { key: 'k' });
    const looks = () => events.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id).length;
    await Promise.race([events.next(() => looks() >= 2), app.finished(duplicate).catch(() => undefined)]);
    expect(events.of('idempotencyReleased')).toEqual([]);
    expect(await (await app.queue.getJob(first.id!))!.getState()).toBe('delayed');
    // 96feb48: the duplicate ran from scratch beside the parked job.
    expect(ran).toEqual([`${first.id}:1`]);
  }, 30_000);
});

describe.each(['sqlite', 'redis'] as const)('rv52 C: queues of one name under bull and {bull} (%s)', (kind) => {
  const { parkingApp, onCleanup } = parkingSuite(kind, 'rv52c');

  it("a duplicate in the bull queue waits for the {bull} queue's parked job of its scope", async () => {
    const ran: string[] = [];
    const queue = uniqueName('rv52c');
    const client = redisClient();
    onCleanup(async () => {
      await deleteKeys(client, await scanKeys(client, `{bull}:${queue}:*`));
      await client.quit();
    });
    // One module prefix: one Redis store of records (a SQL store is one table whatever the prefix).
    const prefix = uniqueName('rv52c-ujt');
    const tagged = await parkingApp(ran, {}, { queue, prefix, queueOptions: { prefix: '{bull}' } });
    const events = new EventLog(tagged.app);
    const first = await tagged.app.queue.add('charge', { key: 'k', steps: true }, { jobId: 'parked' });
    expect(tagged.app.queue.qualifiedName).toBe(`{bull}:${queue}`);
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const plainApp = await parkingApp(ran, {}, { queue, prefix });
    const plainEvents = new EventLog(plainApp.app);
    expect(plainApp.app.queue.qualifiedName).toBe(`bull:${queue}`);
    const duplicate = await plainApp.app.queue.add('charge', { key: 'k' });
    const looks = () => plainEvents.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id).length;
    await Promise.race([plainEvents.next(() => looks() >= 2), plainApp.app.finished(duplicate).catch(() => undefined)]);
    expect(plainEvents.of('idempotencyReleased')).toEqual([]);
    expect(await (await tagged.app.queue.getJob(first.id!))!.getState()).toBe('delayed');
    // 96feb48: the duplicate read bull:<queue>:parked (not there), released the record and ran from scratch.
    expect(ran).toEqual([`${first.id}:1`]);
  }, 30_000);
});
