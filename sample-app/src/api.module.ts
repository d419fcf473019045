import { Module } from '@nestjs/common';
import { UniqueJobsModule } from 'nestjs-unique-jobs';
import { ChargesController } from './charges/charges.controller.js';
import { ChargesService } from './charges/charges.service.js';
import { config } from './config.js';
import { DatabaseModule } from './database/database.module.js';
import { JobsController } from './jobs/jobs.controller.js';
import { PaymentsController } from './payments/payments.controller.js';
import { PaymentsService } from './payments/payments.service.js';
import { SettlePaymentJob } from './payments/settle-payment.job.js';
import { WebhooksController } from './payments/webhooks.controller.js';
import { WebhooksService } from './payments/webhooks.service.js';
import { FakePaymentProviderController } from './provider/fake-payment-provider.controller.js';
import { FakePaymentProvider } from './provider/fake-payment-provider.service.js';
import { queueModules } from './queues.js';

/**
 * The HTTP side (`ROLE=api`): receives webhooks and orders, enqueues jobs, shows payments, charges and jobs (read
 * through TypeORM repositories). It loads no processor: `jobs: [SettlePaymentJob]` is what makes its enqueues unique
 * (a producer-only application), and it needs no idempotency store.
 */
@Module({
  imports: [
    ...queueModules,
    DatabaseModule,
    UniqueJobsModule.forRoot({ prefix: config.uniqueJobsPrefix, jobs: [SettlePaymentJob] }),
  ],
  controllers: [
    WebhooksController,
    PaymentsController,
    ChargesController,
    JobsController,
    FakePaymentProviderController,
  ],
  providers: [WebhooksService, PaymentsService, ChargesService, FakePaymentProvider],
})
export class ApiModule {}
