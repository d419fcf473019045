import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Job } from 'bullmq';
import { IdempotencyKey, idempotencyOf, UniqueJob, type IdempotencyJob } from 'nestjs-unique-jobs';
import type { EntityManager } from 'typeorm';
import { HoldPoints } from '../common/hold-points.js';
import { SETTLE_CONCURRENCY } from '../config.js';
import { PaymentsService, type Settlement } from './payments.service.js';
import { PAYMENTS_QUEUE, SettlePaymentJob, type SettlePaymentData } from './settle-payment.job.js';

/**
 * Settles payment events. Two guards, each for what the other cannot see:
 * - `@UniqueJob`: one job per event id while it is queued or running; re-deliveries meanwhile are rejected.
 * - `@IdempotencyKey`, transactional, on the TypeORM store registered as `sql`: `process` runs inside a transaction of
 *   the app's DataSource, and the settlement (written through that transaction's EntityManager) commits with the
 *   completed idempotency record. A delivery after completion (the lock is gone by then) is replayed: the job completes
 *   with the stored settlement and `process` is not called; a worker killed mid-job leaves neither the row nor the
 *   record.
 */
@Processor(PAYMENTS_QUEUE, { concurrency: SETTLE_CONCURRENCY })
@UniqueJob(SettlePaymentJob)
@IdempotencyKey({
  key: (job: IdempotencyJob<SettlePaymentData>) => job.data.eventId,
  fingerprint: false, // the payload may jitter between deliveries
  store: 'sql',
  transactional: true,
})
export class SettlePaymentProcessor extends WorkerHost {
  constructor(
    private readonly payments: PaymentsService,
    private readonly holdPoints: HoldPoints,
  ) {
    super();
  }

  async process(job: Job<SettlePaymentData>): Promise<Settlement> {
    const { eventId, payload } = job.data;
    await this.holdPoints.reach(`settle:${eventId}`);
    const transaction = idempotencyOf<EntityManager>(job).transaction!; // the claim's transaction
    return this.payments.settle(transaction, {
      eventId,
      amountCents: payload.amount,
      currency: payload.currency,
      jobId: job.id!,
    });
  }
}
