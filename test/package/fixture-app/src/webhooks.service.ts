// webhooks.service.ts — the producer (the README's example, with the imports a real file needs)
import { InjectQueue } from '@nestjs/bullmq';
import { Injectable } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { UniqueJobsService } from 'nestjs-unique-jobs';
import type { SettlePaymentData } from './settle-payment.job.js';

@Injectable()
export class WebhooksService {
  constructor(
    @InjectQueue('payments') private readonly queue: Queue<SettlePaymentData>,
    private readonly uniqueJobs: UniqueJobsService,
  ) {}

  // Plain BullMQ: a duplicate returns the job that holds the lock (or throws DuplicateJobError with `raise`).
  receive(event: { id: string; data: SettlePaymentData['payload'] }) {
    return this.queue.add('settle', { eventId: event.id, payload: event.data });
  }

  // Or ask explicitly: { status: 'enqueued', job } | { status: 'duplicate', existingJobId, strategy, deadSetEntryId }
  receiveExplicitly(event: { id: string; data: SettlePaymentData['payload'] }) {
    return this.uniqueJobs.enqueue(this.queue, 'settle', { eventId: event.id, payload: event.data });
  }
}
