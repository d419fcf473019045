import { Body, Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import { parsePaymentEvent } from './payment-event.js';
import { WebhooksService } from './webhooks.service.js';

/** The answer to a webhook delivery. */
export type WebhookReceipt =
  { status: 'enqueued'; jobId: string } | { status: 'duplicate'; existingJobId: string | undefined };

/** Where the payment provider delivers its events. */
@Controller('webhooks')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  /** 202 either way: a duplicate is accepted (the provider must stop retrying), and recorded, not settled twice. */
  @Post('payments')
  @HttpCode(HttpStatus.ACCEPTED)
  async receive(@Body() body: unknown): Promise<WebhookReceipt> {
    const result = await this.webhooks.receive(parsePaymentEvent(body));
    return result.status === 'enqueued'
      ? { status: 'enqueued', jobId: result.job.id! }
      : { status: 'duplicate', existingJobId: result.existingJobId };
  }
}
