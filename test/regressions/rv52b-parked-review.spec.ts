// Review helper rv52b of 5817fd2 (parked records' marks), beside the mark's wait (rv52b-mark-wait):
// - Fails at 5817fd2: a delivery settling the record of a parked job of another queue (a scope shared by queues)
//   reported idempotencyReleased / idempotencyFailureKept with the parked job's id but its own queue and job name (the
//   mark named the parked job's queue by its qualified name only): the mark now names its queue and job name too
//   (asserted in parked-record-stale.spec.ts, "one deployment").
// - Sound, kept as tests: no mark left once step jobs complete (a later step retried too) or a duplicate settled a
//   removed job's record; a refused mark write parks the step all the same; a failing mark read leaves the record.
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Queue, type Job } from 'bullmq';
import { UniqueJobsReaper } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { HOUR_MS, parkThenRemove, parkingOptions } from '../support/parking-app.js';
import { EventLog } from '../support/events.js';
import { bullOptions, scanKeys } from '../support/redis.js';
import type { StepData } from '../support/step-handler.js';
import { stepStore, type StepStore } from '../support/step-stores.js';
import { waitFor } from '../support/wait.js';
import { ParkedRecordMarks } from '../../lib/redis/parked-record-marks.js';

describe.each(['redis', 'sqlite'] as const)('rv52b: marks a step job leaves behind (%s store)', (kind) => {
  const { start, redis } = useApps(`rv52b-left-${kind}`);
  let sql: StepStore | undefined;
  beforeAll(async () => {
    if (kind !== 'redis') sql = await stepStore(kind);
  });
  afterAll(async () => sql?.close());

  async function app(ran: string[], delayMs: number, grace?: number): Promise<TestApp> {
    const next = async (j: Job<StepData>) => {
      if (j.attemptsMade < ((j.data as { fail?: number }).fail ?? 0)) throw new Error('flaky');
      return 'done';
    };
    const reaper = { interval: false, ...(grace === undefined ? {} : { grace }) };
    return start(parkingOptions(sql, ran, { module: { reaper }, handler: { delayMs, next } }));
  }
  const marks = (prefix: string) => scanKeys(redis, `${prefix}:*:parked`);

  it('none once step jobs complete (one with a failed later step retried)', async () => {
    const ran: string[] = [];
    const started = await app(ran, 10);
    const jobs = await Promise.all([
      started.queue.add('charge', { key: 'a', steps: true }),
      started.queue.add('charge', { key: 'b', steps: true, fail: 2 }, { attempts: 3 }),
    ]);
    for (const job of jobs) await expect(started.finished(job)).resolves.toBe('done');
    await waitFor('the unmarks', async () => (await marks(started.prefix)).length === 0, 3_000);
  }, 30_000);

  it('none once a duplicate settled the record of a removed step job', async () => {
    const ran: string[] = [];
    const started = await app(ran, HOUR_MS);
    await parkThenRemove(started, 'k');
    expect(await marks(started.prefix)).toHaveLength(1); // a removal without the library leaves it
    const duplicate = await started.queue.add('charge', { key: 'k' });
    await expect(started.finished(duplicate)).resolves.toBe('fresh');
    await waitFor('the unmark', async () => (await marks(started.prefix)).length === 0, 3_000);
  }, 30_000);

  if (kind === 'redis') {
    it('none once the orphan reaper released the record of a removed step job', async () => {
      const ran: string[] = [];
      const started = await app(ran, HOUR_MS, 0);
      await parkThenRemove(started, 'k');
      expect(await marks(started.prefix)).toHaveLength(1);
      const report = await started.moduleRef.get(UniqueJobsReaper).run();
      expect(report.reaped.idempotencyClaims).toBe(1);
      expect(await marks(started.prefix)).toEqual([]);
    }, 30_000);
  }
});

describe('rv52b: the library Redis failing the marks (sqlite store)', () => {
  const { start, onCleanup } = useApps('rv52b-fail');
  let sql: StepStore;
  beforeAll(async () => {
    sql = await stepStore('sqlite');
  });
  afterAll(async () => sql?.close());
  afterEach(() => {
    jest.restoreAllMocks();
  });

  async function app(ran: string[], delayMs: number): Promise<TestApp> {
    return start(parkingOptions(sql, ran, { handler: { delayMs } }));
  }

  it('a refused mark write: the step still parks and the job runs its next step', async () => {
    jest
      .spyOn(ParkedRecordMarks.prototype, 'mark')
      .mockRejectedValue(new Error("NOPERM this user has no permissions to access the 'x:parked' key"));
    const ran: string[] = [];
    const started = await app(ran, 10);
    const events = new EventLog(started);
    const job = await started.queue.add('charge', { key: 'refused', steps: true });
    await expect(started.finished(job)).resolves.toBe('done');
    expect(events.of('idempotencyHandedOver').filter((e) => e.jobId === job.id)).toHaveLength(1);
    expect(ran).toEqual([`${job.id}:1`, `${job.id}:2`]);
  }, 30_000);

  it('a failing mark read: a duplicate of a removed parked job waits, nothing released', async () => {
    jest.spyOn(ParkedRecordMarks.prototype, 'parkerOf').mockRejectedValue(new Error('read failed'));
    const ran: string[] = [];
    const started = await app(ran, HOUR_MS);
    const events = new EventLog(started);
    const first = await started.queue.add('charge', { key: 'unread', steps: true });
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const plain = new Queue(started.queue.name, bullOptions());
    onCleanup(() => plain.close());
    await (await plain.getJob(first.id!))!.remove();
    const duplicate = await started.queue.add('charge', { key: 'unread' });
    const looks = () => events.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id).length;
    await events.next(() => looks() >= 2);
    expect(events.of('idempotencyReleased')).toEqual([]);
    expect(ran).toEqual([`${first.id}:1`]);
  }, 30_000);
});
