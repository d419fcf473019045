import { Module } from '@nestjs/common';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { UniqueJobsIdempotencyMigration } from 'nestjs-unique-jobs';
import { Charge } from '../charges/charge.entity.js';
import { CHARGE_CONCURRENCY, config, SETTLE_CONCURRENCY } from '../config.js';
import { Payment } from '../payments/payment.entity.js';
import { SampleAppTables1767312000000 } from './migrations/1767312000000-sample-app-tables.js';

/**
 * The sample's TypeORM DataSource: PostgreSQL when `DATABASE_URL` is set, else the SQLite file `SQLITE_FILE`
 * (better-sqlite3: embedded, nothing to install). No `synchronize`: the schema comes from migrations, run at startup.
 */
export function databaseOptions(): TypeOrmModuleOptions {
  const common = {
    entities: [Payment, Charge],
    // The library's migration creates the idempotency records' table; the app's creates its own tables. Every process
    // runs the pending ones when its DataSource starts, before the UniqueJobsModule checks its store. TypeORM does not
    // lock them across processes: on a new database, processes that start at the same moment may collide (the loser is
    // retried by TypeOrmModule, 3 s later). A fleet runs `typeorm migration:run` once, in its deploy, instead.
    migrations: [UniqueJobsIdempotencyMigration, SampleAppTables1767312000000],
    migrationsRun: true,
  };
  if (config.databaseUrl) {
    return {
      type: 'postgres',
      url: config.databaseUrl,
      // A transactional handler holds one connection until it commits, and the claims and completions of other jobs
      // need another: one above the worker's concurrency.
      poolSize: SETTLE_CONCURRENCY + CHARGE_CONCURRENCY + 1,
      ...common,
    };
  }
  // One connection per process (TypeORM's better-sqlite3 driver). WAL: the API reads while the worker writes.
  return { type: 'better-sqlite3', database: config.sqliteFile, enableWAL: true, timeout: 10_000, ...common };
}

/**
 * The DataSource, migrated, and the repositories of the entities (`@InjectRepository(Payment)`). Each process (the API,
 * each worker) has its own; in a worker it is used only by the idempotency store and the handlers' transactions.
 */
@Module({
  imports: [TypeOrmModule.forRootAsync({ useFactory: databaseOptions }), TypeOrmModule.forFeature([Payment, Charge])],
  exports: [TypeOrmModule],
})
export class DatabaseModule {}
