import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository, type EntityManager } from 'typeorm';
import { Payment } from './payment.entity.js';

/** What settling returns: stored with the idempotency record and replayed to every later delivery of the event. */
export interface Settlement {
  paymentId: number;
  eventId: string;
  settledByJobId: string;
}

@Injectable()
export class PaymentsService {
  constructor(@InjectRepository(Payment) private readonly payments: Repository<Payment>) {}

  /**
   * Settles the event's payment through `manager`: in the processor, the transaction of the event's idempotency claim,
   * so the row commits (or rolls back) with the claim's record. A no-op on an already-settled payment: the existing
   * settlement is returned.
   */
  async settle(
    manager: EntityManager,
    payment: { eventId: string; amountCents: number; currency: string; jobId: string },
  ): Promise<Settlement> {
    const payments = manager.getRepository(Payment);
    const settled =
      (await payments.findOneBy({ eventId: payment.eventId })) ??
      (await payments.save(
        payments.create({
          eventId: payment.eventId,
          amountCents: payment.amountCents,
          currency: payment.currency,
          settledAt: new Date(),
          settledByJobId: payment.jobId,
        }),
      ));
    return { paymentId: settled.id, eventId: settled.eventId, settledByJobId: settled.settledByJobId };
  }

  /** Every settled payment, oldest first (the API's reads, through the injected repository). */
  list(): Promise<Payment[]> {
    return this.payments.find({ order: { id: 'ASC' } });
  }
}
