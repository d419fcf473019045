import { Injectable } from '@nestjs/common';

/** A settled payment. */
export interface Payment {
  eventId: string;
  amount: number;
  settledAt: number;
  /** How many times settle() ran for it (idempotent: only the first changes anything). */
  settleCalls: number;
}

/**
 * The payments ledger of the sample. In memory for now; the idempotency issue moves it to SQL with a unique index on
 * the event id. `settle` is a no-op on an already-settled payment.
 */
@Injectable()
export class PaymentsService {
  private readonly payments = new Map<string, Payment>();

  settle(eventId: string, amount: number): Payment {
    const existing = this.payments.get(eventId);
    if (existing) {
      existing.settleCalls += 1;
      return existing;
    }
    const payment = { eventId, amount, settledAt: Date.now(), settleCalls: 1 };
    this.payments.set(eventId, payment);
    return payment;
  }

  list(): Payment[] {
    return [...this.payments.values()];
  }
}
