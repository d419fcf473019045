// Review helper rv52b of 5817fd2: a step's handover waited for its parked mark (a SET on the library's Redis) before
// the store call. A process whose Redis connection drops after the handler's `job.moveToDelayed` (ioredis queues the
// SET until it reconnects: BullMQ's connections have `maxRetriesPerRequest: null`) held its SQL handover that long,
// while its claim's lease (no longer renewed: the handler ended) ran out: a duplicate took the claim over and ran the
// handler from its first step beside the parked job. Before the marks a SQL handover needed no Redis. The mark is an
// aid (a record without one waits for its lease), so it must not hold the handover.
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import { stepHandler, type StepData } from '../support/step-handler.js';
import { byKey, stepStore, type StepStore } from '../support/step-stores.js';
import { waitFor } from '../support/wait.js';
import { ParkedRecordMarks } from '../../lib/redis/parked-record-marks.js';

const HOUR_MS = 60 * 60 * 1000;

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
    // The library's connection is away for 1.5 s after the step moved its job (the SET waits in ioredis's queue).
    jest.spyOn(ParkedRecordMarks.prototype, 'mark').mockImplementation(async function (
      this: ParkedRecordMarks,
      ...args: Parameters<ParkedRecordMarks['mark']>
    ) {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      return original.apply(this, args);
    });
    const app = await start({
      module: { reaper: { interval: false }, idempotency: { stores: { sql: sql.store } } },
      worker: { concurrency: 2 },
      idempotency: { key: byKey, lease: 200, fingerprint: false, store: 'sql' },
      handler: async (job: Job<StepData & { steps?: boolean }>) => {
        if (job.data.steps) return stepHandler(ran, { delayMs: HOUR_MS })(job);
        ran.push(`${job.id}:fresh`);
        return 'fresh';
      },
    });
    const first = await app.queue.add('charge', { key: 'k', steps: true });
    await waitFor('step 1 to run', () => ran.includes(`${first.id}:1`), 10_000);
    const duplicate = await app.queue.add('charge', { key: 'k' });
    // Past the mark's hold (1.5 s) and the first claim's lease (200 ms): the duplicate has looked again.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    // 5817fd2: [first:1, duplicate:fresh]: the duplicate took the unrenewed claim over and ran from the first step.
    expect(ran).toEqual([`${first.id}:1`]);
    expect(await (await app.queue.getJob(duplicate.id!))!.getState()).toBe('delayed');
  }, 30_000);
});
