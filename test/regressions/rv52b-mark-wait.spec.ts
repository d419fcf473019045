// Review helper rv52b of 5817fd2: a step's handover waited for its parked mark (a SET on the library's Redis) before
// the store call. A process whose Redis connection drops after the handler's `job.moveToDelayed` (ioredis queues the
// SET until it reconnects: BullMQ's connections have `maxRetriesPerRequest: null`) held its SQL handover that long,
// while its claim's lease (no longer renewed: the handler ended) ran out: a duplicate took the claim over and ran the
// handler from its first step beside the parked job. Before the marks a SQL handover needed no Redis. The mark is an
// aid (a record without one waits for its lease), so it must not hold the handover.
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { parkingOptions } from '../support/parking-app.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { stepStore, type StepStore } from '../support/step-stores.js';
import { ParkedRecordMarks } from '../../lib/redis/parked-record-marks.js';

describe('rv52b: a parked mark that waits for Redis (sqlite store)', () => {
  const { start } = useApps('rv52b-mark-wait');
  let sql: StepStore;
  beforeAll(async () => {
    sql = await stepStore('sqlite');
  });
  afterAll(async () => sql?.close());
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('does not hold the handover past the claim lease: a duplicate waits for the parked job', async () => {
    const ran: string[] = [];
    const original = ParkedRecordMarks.prototype.mark;
    // The library's connection is away after the step moved its job (the SET waits in ioredis's queue) until the test
    // lets it go.
    const away = deferred<void>();
    jest.spyOn(ParkedRecordMarks.prototype, 'mark').mockImplementation(async function (
      this: ParkedRecordMarks,
      ...args: Parameters<ParkedRecordMarks['mark']>
    ) {
      await away.promise;
      return original.apply(this, args);
    });
    const app = await start({ ...parkingOptions(sql, ran), worker: { concurrency: 2 } });
    const events = new EventLog(app);
    const first = await app.queue.add('charge', { key: 'k', steps: true });
    // 5817fd2: no handover until the mark was written; the claim, no longer renewed, lapsed after its lease (200 ms).
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const duplicate = await app.queue.add('charge', { key: 'k' });
    const looks = () => events.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id).length;
    await events.next(() => looks() >= 2); // a lease apart: it waits for the parked job
    away.resolve();
    expect(ran).toEqual([`${first.id}:1`]);
    expect(events.of('idempotencyClaimed').filter((e) => e.jobId === duplicate.id)).toEqual([]);
  }, 30_000);
});
