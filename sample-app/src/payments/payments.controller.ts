import { Controller, DefaultValuePipe, Get, ParseIntPipe, Query } from '@nestjs/common';
import { UniqueJobsService } from 'nestjs-unique-jobs';
import type { Payment } from './payment.entity.js';
import { PaymentsService } from './payments.service.js';
import { PAYMENTS_QUEUE, type SettlePaymentData } from './settle-payment.job.js';

/** A delivery rejected as a duplicate, from the library's dead set. */
export interface RejectedDelivery {
  eventId: string;
  /** The job that held the event's lock when the duplicate arrived. */
  existingJobId: string | undefined;
  reason: string;
  rejectedAt: string;
}

/** `GET /payments`: the ledger and the duplicates that were kept out of it. */
export interface PaymentsOverview {
  settlements: number;
  payments: Payment[];
  rejectedDuplicates: { total: number; latest: RejectedDelivery[] };
}

@Controller('payments')
export class PaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    private readonly uniqueJobs: UniqueJobsService,
  ) {}

  /** Settled payments, and the latest rejected duplicates (`?duplicates=N`, default 20, newest first). */
  @Get()
  async overview(
    @Query('duplicates', new DefaultValuePipe(20), ParseIntPipe) limit: number,
  ): Promise<PaymentsOverview> {
    const deadSet = this.uniqueJobs.deadSet;
    const [payments, total, entries] = await Promise.all([
      this.payments.list(),
      deadSet.size(),
      deadSet.list({ limit: Math.min(Math.max(limit, 0), 1000) }),
    ]);
    const latest = entries
      .filter((entry) => entry.queue === PAYMENTS_QUEUE)
      .map((entry) => ({
        eventId: (entry.data as SettlePaymentData).eventId,
        existingJobId: entry.existingJobId,
        reason: entry.reason,
        rejectedAt: new Date(entry.rejectedAt).toISOString(),
      }));
    return { settlements: payments.length, payments, rejectedDuplicates: { total, latest } };
  }
}
