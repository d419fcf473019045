import { Injectable } from '@nestjs/common';
import { config } from '../config.js';
import type { ProviderCharge } from '../provider/fake-payment-provider.service.js';

/** The payment provider's API: it charges once per `Idempotency-Key`, and returns that charge to every repeat. */
@Injectable()
export class PaymentProviderClient {
  async createCharge(
    charge: { customerId: string; amountCents: number; description: string },
    idempotencyKey: string,
  ): Promise<ProviderCharge> {
    const response = await fetch(`${config.providerUrl}/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify(charge),
    });
    if (!response.ok) throw new Error(`the payment provider answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as ProviderCharge;
  }
}
