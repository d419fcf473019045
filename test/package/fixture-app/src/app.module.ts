// app.module.ts (the README's example; the connection and the key prefixes come from the environment)
import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { UniqueJobsModule } from 'nestjs-unique-jobs';
import { bullPrefix, connection, uniqueJobsPrefix } from './config.js';
import { PaymentsService } from './payments.service.js';
import { SettlePaymentJob } from './settle-payment.job.js';
import { SettlePaymentProcessor } from './settle-payment.processor.js';
import { WebhooksService } from './webhooks.service.js';

@Module({
  imports: [
    BullModule.forRoot({ connection, prefix: bullPrefix }),
    BullModule.registerQueue({ name: 'payments' }),
    UniqueJobsModule.forRoot({ jobs: [SettlePaymentJob], prefix: uniqueJobsPrefix }), // reuses BullMQ's connection
  ],
  providers: [PaymentsService, SettlePaymentProcessor, WebhooksService],
})
export class AppModule {}
