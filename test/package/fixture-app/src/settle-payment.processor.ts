// settle-payment.processor.ts (the README's example, with the imports a real file needs)
import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Job } from 'bullmq';
import { UniqueJob } from 'nestjs-unique-jobs';
import { PaymentsService } from './payments.service.js';
import { SettlePaymentJob, type SettlePaymentData } from './settle-payment.job.js';

@Processor('payments')
@UniqueJob(SettlePaymentJob)
export class SettlePaymentProcessor extends WorkerHost {
  constructor(private readonly payments: PaymentsService) {
    super();
  }

  async process(job: Job<SettlePaymentData>) {
    return this.payments.settle(job.data.eventId); // keep it a no-op on an already-settled payment
  }
}
