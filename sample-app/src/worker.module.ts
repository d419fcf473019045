import { Module } from '@nestjs/common';
import { UniqueJobsModule } from 'nestjs-unique-jobs';
import { ChargeCustomerProcessor } from './charges/charge-customer.processor.js';
import { ChargesRepository } from './charges/charges.repository.js';
import { PaymentProviderClient } from './charges/payment-provider.client.js';
import { HoldPoints } from './common/hold-points.js';
import { config } from './config.js';
import { AppDatabase } from './database/app-database.js';
import { DatabaseModule } from './database/database.module.js';
import { PaymentsRepository } from './payments/payments.repository.js';
import { SettlePaymentJob } from './payments/settle-payment.job.js';
import { SettlePaymentProcessor } from './payments/settle-payment.processor.js';
import { queueModules } from './queues.js';

/**
 * The job side (`ROLE=worker`): the processors, and the SQL idempotency store their `@IdempotencyKey({ store: 'sql' })`
 * names.
 */
@Module({
  imports: [
    ...queueModules,
    DatabaseModule,
    UniqueJobsModule.forRootAsync({
      imports: [DatabaseModule],
      inject: [AppDatabase],
      useFactory: async (database: AppDatabase) => ({
        prefix: config.uniqueJobsPrefix,
        jobs: [SettlePaymentJob],
        idempotency: { stores: { sql: await database.idempotencyStore() } },
      }),
    }),
  ],
  providers: [
    SettlePaymentProcessor,
    ChargeCustomerProcessor,
    PaymentsRepository,
    ChargesRepository,
    PaymentProviderClient,
    HoldPoints,
  ],
})
export class WorkerModule {}
