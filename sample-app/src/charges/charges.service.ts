import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository, type EntityManager } from 'typeorm';
import { Charge } from './charge.entity.js';

@Injectable()
export class ChargesService {
  constructor(@InjectRepository(Charge) private readonly charges: Repository<Charge>) {}

  /**
   * Records the provider's charge of an order through `manager`: in the processor, the transaction of the order's
   * idempotency claim, so the row commits (or rolls back) with the claim's record.
   */
  record(manager: EntityManager, charge: Omit<Charge, 'id'>): Promise<Charge> {
    const charges = manager.getRepository(Charge);
    return charges.save(charges.create(charge));
  }

  /** Every charge, oldest first (the API's reads, through the injected repository). */
  list(): Promise<Charge[]> {
    return this.charges.find({ order: { id: 'ASC' } });
  }
}
