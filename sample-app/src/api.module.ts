import { Module } from '@nestjs/common';
import { UniqueJobsModule } from 'nestjs-unique-jobs';
import { ChargesController } from './charges/charges.controller.js';
import { ChargesRepository } from './charges/charges.repository.js';
import { config } from './config.js';
import { DatabaseModule } from './database/database.module.js';
import { JobsController } from './jobs/jobs.controller.js';
import { PaymentsController } from './payments/payments.controller.js';
import { PaymentsRepository } from './payments/payments.repository.js';
import { SettlePaymentJob } from './payments/settle-payment.job.js';
import { WebhooksController } from './payments/webhooks.controller.js';
import { WebhooksService } from './payments/webhooks.service.js';
import { FakePaymentProviderController } from './provider/fake-payment-provider.controller.js';
import { FakePaymentProvider } from './provider/fake-payment-provider.service.js';
import { queueModules } from './queues.js';

/**
 * The HTTP side (`ROLE=api`): receives webhooks and orders, enqueues jobs, shows payments, charges and jobs. It loads
 * no processor: `jobs: [SettlePaymentJob]` is what makes its enqueues unique (a producer-only application).
 */
@Module({
  imports: [
    ...queueModules,
    UniqueJobsModule.forRoot({ prefix: config.uniqueJobsPrefix, jobs: [SettlePaymentJob] }),
    DatabaseModule,
  ],
  controllers: [
    WebhooksController,
    PaymentsController,
    ChargesController,
    JobsController,
    FakePaymentProviderController,
  ],
  providers: [WebhooksService, PaymentsRepository, ChargesRepository, FakePaymentProvider],
})
export class ApiModule {}
