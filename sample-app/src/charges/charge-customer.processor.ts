import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Job } from 'bullmq';
import { IdempotencyKey, idempotencyOf, type IdempotencyJob } from 'nestjs-unique-jobs';
import type { EntityManager } from 'typeorm';
import { HoldPoints } from '../common/hold-points.js';
import { CHARGE_CONCURRENCY } from '../config.js';
import { CHARGES_QUEUE, type ChargeCustomerData, type ChargeResult } from './charge-customer.job.js';
import { ChargesService } from './charges.service.js';
import { PaymentProviderClient } from './payment-provider.client.js';

/**
 * ChargeCustomerJob: charges the customer at the payment provider, then records the charge. No `@UniqueJob`: every
 * request to charge an order becomes a job, and `@IdempotencyKey` on the order id makes the charge happen once.
 *
 * - Our `charges` row is written through the claim's transaction (`idempotencyOf<EntityManager>(job).transaction`, the
 *   TypeORM store registered as `sql`), so it commits with the completed record, or not at all: a worker killed
 *   mid-job leaves no row, and the job's next run takes the claim over. Other jobs of the order wait meanwhile, then
 *   replay the result.
 * - The provider cannot join our transaction, so it gets the downstream key instead: the same for every delivery,
 *   retry and takeover of the order, so it charges once however often we call it.
 *
 * The short `lockDuration` and `lease` make a crash visible within seconds (the demo kills this worker mid-job): BullMQ
 * hands the job of a dead worker to another after 3 s, and the idempotency claim can be taken over after 3 s. BullMQ's
 * and the library's defaults (30 s) suit production.
 */
@Processor(CHARGES_QUEUE, { concurrency: CHARGE_CONCURRENCY, lockDuration: 3_000, stalledInterval: 1_000 })
@IdempotencyKey({
  key: (job: IdempotencyJob<ChargeCustomerData>) => job.data.orderId,
  store: 'sql',
  transactional: true,
  lease: 3_000,
})
export class ChargeCustomerProcessor extends WorkerHost {
  constructor(
    private readonly provider: PaymentProviderClient,
    private readonly charges: ChargesService,
    private readonly holdPoints: HoldPoints,
  ) {
    super();
  }

  async process(job: Job<ChargeCustomerData>): Promise<ChargeResult> {
    const { orderId, customerId, amountCents } = job.data;
    const idempotency = idempotencyOf<EntityManager>(job);
    const providerCharge = await this.provider.createCharge(
      { customerId, amountCents, description: `order ${orderId}` },
      idempotency.downstreamKey('charge'),
    );
    const transaction = idempotency.transaction!; // the claim's transaction
    const charge = await this.charges.record(transaction, {
      orderId,
      providerChargeId: providerCharge.id,
      amountCents,
      chargedByJobId: job.id!,
    });
    // Charged at the provider, our row written in the open transaction, not committed: where the demo kills the worker.
    await this.holdPoints.reach(`charge:${orderId}`, {
      jobId: job.id,
      chargeId: charge.id,
      transactionOpen: transaction.queryRunner?.isTransactionActive === true,
    });
    return {
      orderId,
      chargeId: charge.id,
      providerChargeId: providerCharge.id,
      chargedByJobId: job.id!,
      takeover: idempotency.takeover,
    };
  }
}
