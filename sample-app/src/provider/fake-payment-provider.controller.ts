import { BadRequestException, Body, Controller, Get, Headers, Post } from '@nestjs/common';
import { FakePaymentProvider, type ProviderCall, type ProviderCharge } from './fake-payment-provider.service.js';

/** The simulated provider's HTTP API (`/provider`), which the worker's PaymentProviderClient calls. */
@Controller('provider')
export class FakePaymentProviderController {
  constructor(private readonly provider: FakePaymentProvider) {}

  @Post('charges')
  createCharge(
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Body() body: Pick<ProviderCharge, 'customerId' | 'amountCents' | 'description'>,
  ): Promise<ProviderCharge> {
    if (!idempotencyKey) throw new BadRequestException('the Idempotency-Key header is required');
    return this.provider.createCharge(idempotencyKey, body);
  }

  @Get('charges')
  history(): { charges: ProviderCharge[]; calls: ProviderCall[] } {
    return this.provider.history();
  }
}
