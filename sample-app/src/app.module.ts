import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { UniqueJobsModule } from 'nestjs-unique-jobs';
import { PaymentsService } from './payments/payments.service.js';
import { SettlePaymentJob } from './payments/settle-payment.job.js';
import { SettlePaymentProcessor } from './payments/settle-payment.processor.js';
import { WebhooksService } from './payments/webhooks.service.js';

/** Redis from REDIS_URL, else 127.0.0.1:6379. */
export function redisConnection(): { host: string; port: number; maxRetriesPerRequest: null } {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  return { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
}

@Module({
  imports: [
    BullModule.forRoot({ connection: redisConnection() }),
    BullModule.registerQueue({ name: 'payments' }),
    UniqueJobsModule.forRoot({ prefix: process.env.UNIQUE_JOBS_PREFIX ?? 'sample', jobs: [SettlePaymentJob] }),
  ],
  providers: [PaymentsService, SettlePaymentProcessor, WebhooksService],
  exports: [PaymentsService, WebhooksService],
})
export class AppModule {}
