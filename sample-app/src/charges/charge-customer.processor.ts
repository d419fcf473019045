import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Job } from 'bullmq';
import { IdempotencyKey, idempotencyOf, type IdempotencyJob } from 'nestjs-unique-jobs';
import { HoldPoints } from '../common/hold-points.js';
import { CHARGE_CONCURRENCY } from '../config.js';
import { sqlOn, type Connection } from '../database/sql.js';
import { CHARGES_QUEUE, type ChargeCustomerData, type ChargeResult } from './charge-customer.job.js';
import { ChargesRepository } from './charges.repository.js';
import { PaymentProviderClient } from './payment-provider.client.js';

/**
 * ChargeCustomerJob: charges the customer at the payment provider, then records the charge. The provider cannot join
 * our transaction, so it gets the downstream key instead: the same for every delivery, retry and takeover of the
 * order, so it charges once however often we call it. Our `charges` row commits with the idempotency record.
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
    private readonly charges: ChargesRepository,
    private readonly holdPoints: HoldPoints,
  ) {
    super();
  }

  async process(job: Job<ChargeCustomerData>): Promise<ChargeResult> {
    const { orderId, customerId, amountCents } = job.data;
    const idempotency = idempotencyOf<Connection>(job);
    const providerCharge = await this.provider.createCharge(
      { customerId, amountCents, description: `order ${orderId}` },
      idempotency.downstreamKey('charge'),
    );
    const chargeId = await this.charges.record(sqlOn(idempotency.transaction!), {
      orderId,
      providerChargeId: providerCharge.id,
      amountCents,
      chargedByJobId: job.id!,
    });
    await this.holdPoints.reach(`charge:${orderId}`); // charged, not committed: where the demo kills the worker
    return {
      orderId,
      chargeId,
      providerChargeId: providerCharge.id,
      chargedByJobId: job.id!,
      takeover: idempotency.takeover,
    };
  }
}
