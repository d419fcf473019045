import { InjectQueue } from '@nestjs/bullmq';
import { Injectable } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { UniqueJobsService, type EnqueueResult } from 'nestjs-unique-jobs';
import type { PaymentEvent, SettlePaymentData } from './settle-payment.job.js';

/** Receives provider events and enqueues SettlePaymentJob; says whether the delivery was new or a duplicate. */
@Injectable()
export class WebhooksService {
  constructor(
    @InjectQueue('payments') private readonly queue: Queue<SettlePaymentData>,
    private readonly uniqueJobs: UniqueJobsService,
  ) {}

  receive(event: PaymentEvent): Promise<EnqueueResult<SettlePaymentData>> {
    return this.uniqueJobs.enqueue(this.queue, 'settle', { eventId: event.id, payload: event.data });
  }
}
