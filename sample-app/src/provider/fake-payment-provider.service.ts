import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { config } from '../config.js';

/** A charge at the provider. */
export interface ProviderCharge {
  id: string;
  customerId: string;
  amountCents: number;
  description: string;
  idempotencyKey: string;
}

/** A request the provider received. */
export interface ProviderCall {
  idempotencyKey: string;
  at: string;
}

/**
 * A simulated payment provider, in the API process so that it outlives a worker that dies mid-charge. Like a real one
 * it is slow and honours `Idempotency-Key`: the first request with a key creates the charge, every later one gets the
 * same charge back. It keeps everything in memory.
 */
@Injectable()
export class FakePaymentProvider {
  private readonly charges = new Map<string, ProviderCharge>();
  private readonly calls: ProviderCall[] = [];

  async createCharge(
    idempotencyKey: string,
    request: Pick<ProviderCharge, 'customerId' | 'amountCents' | 'description'>,
  ): Promise<ProviderCharge> {
    this.calls.push({ idempotencyKey, at: new Date().toISOString() });
    let charge = this.charges.get(idempotencyKey);
    if (!charge) {
      charge = { id: `ch_${this.charges.size + 1}`, ...request, idempotencyKey };
      this.charges.set(idempotencyKey, charge);
    }
    await sleep(config.providerLatencyMs);
    return charge;
  }

  /** Every charge and every call, oldest first. */
  history(): { charges: ProviderCharge[]; calls: ProviderCall[] } {
    return { charges: [...this.charges.values()], calls: [...this.calls] };
  }
}
