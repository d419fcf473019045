import { Injectable } from '@nestjs/common';
import { AppDatabase } from '../database/app-database.js';
import type { Sql } from '../database/sql.js';

/** A charge as our `charges` table keeps it (unique index on `order_id`). */
export interface Charge {
  id: number;
  orderId: number;
  providerChargeId: string;
  amountCents: number;
  chargedByJobId: string;
}

@Injectable()
export class ChargesRepository {
  constructor(private readonly database: AppDatabase) {}

  /** Records the provider's charge of an order through `sql` (the handler's transaction); resolves the row id. */
  async record(sql: Sql, charge: Omit<Charge, 'id'>): Promise<number> {
    const [row] = await sql.query<{ id: number }>(
      `INSERT INTO charges (order_id, provider_charge_id, amount_cents, charged_by_job_id) VALUES (?, ?, ?, ?)
        RETURNING id`,
      [charge.orderId, charge.providerChargeId, charge.amountCents, charge.chargedByJobId],
    );
    return row.id;
  }

  /** Every charge, oldest first, read on the application's own connection. */
  list(): Promise<Charge[]> {
    return this.database.sql.query<Charge>(
      `SELECT id, order_id AS "orderId", provider_charge_id AS "providerChargeId", amount_cents AS "amountCents",
        charged_by_job_id AS "chargedByJobId" FROM charges ORDER BY id`,
    );
  }
}
