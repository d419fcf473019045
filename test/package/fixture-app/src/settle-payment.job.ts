// settle-payment.job.ts — shared by the producer and the processor (the README's example, as is)
import { defineUniqueJob } from 'nestjs-unique-jobs';

export interface SettlePaymentData {
  eventId: string;
  payload: { amount: number; currency: string };
}

export const SettlePaymentJob = defineUniqueJob<SettlePaymentData>({
  queue: 'payments',
  jobName: 'settle',
  lock: 'until_executed', // locked from enqueue until the job completes
  onConflict: 'reject', // duplicates go to the dead set, inspectable and retryable
  lockArgs: (data) => [data.eventId], // only the event id decides uniqueness
});
