import { Module } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import { TypeOrmIdempotencyStore, UniqueJobsModule } from 'nestjs-unique-jobs';
import type { DataSource } from 'typeorm';
import { ChargeCustomerProcessor } from './charges/charge-customer.processor.js';
import { ChargesService } from './charges/charges.service.js';
import { PaymentProviderClient } from './charges/payment-provider.client.js';
import { HoldPoints } from './common/hold-points.js';
import { config } from './config.js';
import { DatabaseModule } from './database/database.module.js';
import { PaymentsService } from './payments/payments.service.js';
import { SettlePaymentJob } from './payments/settle-payment.job.js';
import { SettlePaymentProcessor } from './payments/settle-payment.processor.js';
import { queueModules } from './queues.js';

/**
 * The job side (`ROLE=worker`): the processors, and the idempotency store their
 * `@IdempotencyKey({ store: 'sql', transactional: true })` names: the TypeORM store on the app's own DataSource, whose
 * transactions the handlers write through. Its table comes from the DataSource's migrations
 * (`UniqueJobsIdempotencyMigration`), run before this factory is called; the module checks it at bootstrap.
 */
@Module({
  imports: [
    ...queueModules,
    DatabaseModule,
    UniqueJobsModule.forRootAsync({
      inject: [getDataSourceToken()],
      useFactory: (dataSource: DataSource) => ({
        prefix: config.uniqueJobsPrefix,
        jobs: [SettlePaymentJob],
        idempotency: { stores: { sql: new TypeOrmIdempotencyStore({ dataSource }) } },
      }),
    }),
  ],
  providers: [
    SettlePaymentProcessor,
    ChargeCustomerProcessor,
    PaymentsService,
    ChargesService,
    PaymentProviderClient,
    HoldPoints,
  ],
})
export class WorkerModule {}
