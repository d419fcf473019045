// Review helper-160 (session 51), finding B: a step job's idempotency claim, handed over to its next delivery for a day
// past its run time, was not released when BullMQ failed that delivery without calling the processor (the worker's
// `maxStartedAttempts`; stalled too often). On a SQL store nothing else freed it: every other delivery of the key
// waited (in delayed, looking again every `lease`) for a day. The worker's `failed` event now releases a record the
// job's resume token owns (settleFailedHandover).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { byKey, stepStore, type StepStore } from '../support/step-stores.js';

describe.each(['sqlite', 'postgres'] as const)(
  'a parked step job failed by BullMQ without its processor (%s)',
  (kind) => {
    const { start } = useApps(`rv51-unprocessed-${kind}`);
    let sql: StepStore;
    beforeAll(async () => {
      sql = await stepStore(kind);
    });
    afterAll(async () => sql?.close());

    it('frees its key: a later delivery of the key runs', async () => {
      const lease = 200;
      const ran: string[] = [];
      const handler = async (job: Job<{ key: string; step?: number; steps?: boolean }>) => {
        ran.push(`${job.id}:${job.data.step ?? 1}`);
        if (!job.data.steps) return 'fresh';
        await job.updateData({ ...job.data, step: 2 });
        await job.moveToDelayed(Date.now() + 100, job.token);
        throw new DelayedError();
      };
      const options = (module: object) => ({
        module: { reaper: { interval: false as const }, idempotency: { stores: { sql: sql.store } }, ...module },
        idempotency: { key: byKey, lease, store: 'sql', fingerprint: false as const },
        handler,
      });
      // A worker with maxStartedAttempts: 1 fails the step job's second delivery without calling the processor.
      const app = await start({ ...options({}), worker: { maxStartedAttempts: 1 } });
      const events = new EventLog(app);
      const first = await app.queue.add('charge', { key: 'k', steps: true });
      await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
      await expect(app.finished(first)).rejects.toThrow(/started more than allowable limit/);
      // Released on the worker's `failed` event, not left for its parked lease (a day).
      await events.next((e) => e.type === 'idempotencyReleased' && e.jobId === first.id);
      // Another worker of the queue (no maxStartedAttempts) takes over.
      await app.worker!.close();
      const other = await start({ ...options({ prefix: app.prefix }), queue: app.queue.name });
      const next = await other.queue.add('charge', { key: 'k' });
      const answer = await other.finished(next);
      await (await app.queue.getJob(next.id!))?.remove();
      expect({ answer, ran }).toEqual({ answer: 'fresh', ran: [`${first.id}:1`, `${next.id}:1`] });
    }, 30_000);
  },
);
