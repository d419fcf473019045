import { InjectQueue } from '@nestjs/bullmq';
import { Injectable } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { UniqueJobsService, type EnqueueResult } from 'nestjs-unique-jobs';
import type { PaymentEvent } from './payment-event.js';
import { PAYMENTS_QUEUE, SETTLE_JOB, type SettlePaymentData } from './settle-payment.job.js';

/** The producer: one SettlePaymentJob per provider event. */
@Injectable()
export class WebhooksService {
  constructor(
    @InjectQueue(PAYMENTS_QUEUE) private readonly queue: Queue<SettlePaymentData>,
    private readonly uniqueJobs: UniqueJobsService,
  ) {}

  /**
   * Enqueues the event's settlement and says what happened: `enqueued` with the new job, or `duplicate` with the id of
   * the job that holds the event's lock (the delivery is kept in the dead set).
   */
  receive(event: PaymentEvent): Promise<EnqueueResult<SettlePaymentData>> {
    return this.uniqueJobs.enqueue(this.queue, SETTLE_JOB, { eventId: event.id, payload: event.data });
  }
}
