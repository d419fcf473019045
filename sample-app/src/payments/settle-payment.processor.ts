import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Job } from 'bullmq';
import { UniqueJob } from 'nestjs-unique-jobs';
import { PaymentsService, type Payment } from './payments.service.js';
import { SettlePaymentJob, type SettlePaymentData } from './settle-payment.job.js';

/** Settles a payment event. `SETTLE_DELAY_MS` simulates a slow settlement so duplicates arrive mid-job. */
@Processor('payments')
@UniqueJob(SettlePaymentJob)
export class SettlePaymentProcessor extends WorkerHost {
  constructor(private readonly payments: PaymentsService) {
    super();
  }

  async process(job: Job<SettlePaymentData>): Promise<Payment> {
    const delay = Number(process.env.SETTLE_DELAY_MS ?? 300);
    await new Promise((resolve) => setTimeout(resolve, delay));
    return this.payments.settle(job.data.eventId, job.data.payload.amount);
  }
}
