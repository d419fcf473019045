import { BadRequestException } from '@nestjs/common';

/** A payment provider's webhook event, as `POST /webhooks/payments` receives it. */
export interface PaymentEvent {
  /** The provider's event id: the same for every delivery of the event. */
  id: string;
  type: 'payment.settled';
  /** Amount in minor units (cents). Other fields (timestamps, delivery attempt) may differ between deliveries. */
  data: { amount: number; currency: string } & Record<string, unknown>;
}

/** The body as a {@link PaymentEvent}, or a 400 naming what is wrong. */
export function parsePaymentEvent(body: unknown): PaymentEvent {
  const event = body as Partial<PaymentEvent> | undefined;
  if (typeof event?.id !== 'string' || event.id === '') throw new BadRequestException('id must be a non-empty string');
  if (event.type !== 'payment.settled') throw new BadRequestException('type must be "payment.settled"');
  const { amount, currency } = event.data ?? {};
  if (!Number.isInteger(amount) || typeof currency !== 'string') {
    throw new BadRequestException('data must have an integer amount and a currency');
  }
  return event as PaymentEvent;
}
