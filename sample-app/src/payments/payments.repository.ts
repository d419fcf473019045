import { Injectable } from '@nestjs/common';
import { AppDatabase } from '../database/app-database.js';
import type { Sql } from '../database/sql.js';

/** A settled payment, as `GET /payments` lists it. */
export interface Payment {
  id: number;
  eventId: string;
  amountCents: number;
  currency: string;
  settledAt: string;
  /** The job whose transaction settled it. */
  settledByJobId: string;
}

/** What settling returns: stored with the idempotency record and replayed to every later delivery of the event. */
export interface Settlement {
  paymentId: number;
  eventId: string;
  settledByJobId: string;
}

/** The `payments` table: one row per provider event (unique index on `provider_event_id`). */
@Injectable()
export class PaymentsRepository {
  constructor(private readonly database: AppDatabase) {}

  /**
   * Settles the event's payment through `sql` (the handler's transaction). A no-op on an already-settled payment: the
   * row is only inserted if the event has none, and the existing settlement is returned either way.
   */
  async settle(
    sql: Sql,
    payment: { eventId: string; amountCents: number; currency: string; jobId: string },
  ): Promise<Settlement> {
    await sql.query(
      `INSERT INTO payments (provider_event_id, amount_cents, currency, settled_at, settled_by_job_id)
        VALUES (?, ?, ?, ?, ?) ON CONFLICT (provider_event_id) DO NOTHING`,
      [payment.eventId, payment.amountCents, payment.currency, new Date().toISOString(), payment.jobId],
    );
    const [settlement] = await sql.query<Settlement>(
      `SELECT id AS "paymentId", provider_event_id AS "eventId", settled_by_job_id AS "settledByJobId"
        FROM payments WHERE provider_event_id = ?`,
      [payment.eventId],
    );
    return settlement;
  }

  /** Every settled payment, oldest first, read on the application's own connection. */
  list(): Promise<Payment[]> {
    return this.database.sql.query<Payment>(
      `SELECT id, provider_event_id AS "eventId", amount_cents AS "amountCents", currency, settled_at AS "settledAt",
        settled_by_job_id AS "settledByJobId" FROM payments ORDER BY id`,
    );
  }
}
