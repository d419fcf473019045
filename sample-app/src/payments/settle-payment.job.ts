import { defineUniqueJob } from 'nestjs-unique-jobs';

/** A provider's payment event, as the webhook receives it. */
export interface PaymentEvent {
  id: string;
  type: 'payment.settled';
  data: { amount: number; currency: string; receivedAt?: string };
}

/** The job's data: the event id plus a payload that may differ between deliveries. */
export interface SettlePaymentData {
  eventId: string;
  payload: PaymentEvent['data'];
}

/**
 * SettlePaymentJob: locked from enqueue until executed, on the event id only (a jittery payload must not break
 * uniqueness); duplicates are rejected into the dead set. Shared by the producer and the processor.
 */
export const SettlePaymentJob = defineUniqueJob<SettlePaymentData>({
  queue: 'payments',
  jobName: 'settle',
  lock: 'until_executed',
  onConflict: 'reject',
  lockArgs: (data) => [data.eventId],
});
