import { defineUniqueJob } from 'nestjs-unique-jobs';
import type { PaymentEvent } from './payment-event.js';

/** Queue and job name of the settlements. */
export const PAYMENTS_QUEUE = 'payments';
export const SETTLE_JOB = 'settle';

/** The job's data: the event id, and a payload that may differ between deliveries of the event. */
export interface SettlePaymentData {
  eventId: string;
  payload: PaymentEvent['data'];
}

/**
 * SettlePaymentJob: locked from enqueue until executed, on the event id only (a jittery payload must not break
 * uniqueness); a delivery while the event's job is queued or running is rejected into the dead set. Shared by the
 * producer (the API) and the processor (the worker).
 */
export const SettlePaymentJob = defineUniqueJob<SettlePaymentData>({
  queue: PAYMENTS_QUEUE,
  jobName: SETTLE_JOB,
  lock: 'until_executed',
  onConflict: 'reject',
  lockArgs: (data) => [data.eventId],
});
