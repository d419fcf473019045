import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** A settled payment: one row per provider event. */
@Entity('payments')
export class Payment {
  @PrimaryGeneratedColumn()
  id!: number;

  /** The provider's event id. Unique: even a write outside `@IdempotencyKey` cannot settle an event twice. */
  @Index('payments_provider_event_id', { unique: true })
  @Column('text', { name: 'provider_event_id' })
  eventId!: string;

  @Column('integer', { name: 'amount_cents' })
  amountCents!: number;

  @Column('text')
  currency!: string;

  @Column({ name: 'settled_at' })
  settledAt!: Date;

  /** The job whose transaction settled it. */
  @Column('text', { name: 'settled_by_job_id' })
  settledByJobId!: string;
}
