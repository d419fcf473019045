import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** Our record of a charge at the payment provider: one row per order. */
@Entity('charges')
export class Charge {
  @PrimaryGeneratedColumn()
  id!: number;

  /** Unique: even a write outside `@IdempotencyKey` cannot charge an order twice. */
  @Index('charges_order_id', { unique: true })
  @Column('integer', { name: 'order_id' })
  orderId!: number;

  /** The provider's charge (`ch_…`). */
  @Column('text', { name: 'provider_charge_id' })
  providerChargeId!: string;

  @Column('integer', { name: 'amount_cents' })
  amountCents!: number;

  /** The job whose transaction recorded it. */
  @Column('text', { name: 'charged_by_job_id' })
  chargedByJobId!: string;
}
