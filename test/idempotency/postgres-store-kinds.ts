// The PostgreSQL stores of the library, each built over one pg pool (or a TypeORM DataSource on the same database), for
// tests that run one scenario against every store.
import { TransactionalAdapterDrizzleOrm } from '@nestjs-cls/transactional-adapter-drizzle-orm';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  DrizzleIdempotencyStore,
  PostgresIdempotencyStore,
  TransactionHostIdempotencyStore,
  TypeOrmIdempotencyStore,
  type IdempotencyStore,
} from '../../lib/index.js';
import { afterAll, beforeAll } from '@jest/globals';
import { PgProxy } from '../support/pg-proxy.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { FakeTransactionHost } from './fake-transaction-host.js';

/** What the stores are built over (read when a store is built: a suite's `beforeAll` may create them). */
export interface PostgresSources {
  pool: pg.Pool;
  dataSource: DataSource;
}

/** Every PostgreSQL store, by name, built on `sources()` with the records in `table`. */
export function postgresStoreKinds(sources: () => PostgresSources, table: string) {
  return {
    PostgresIdempotencyStore: () => new PostgresIdempotencyStore({ pool: sources().pool, table }),
    TypeOrmIdempotencyStore: () => new TypeOrmIdempotencyStore({ dataSource: sources().dataSource, table }),
    DrizzleIdempotencyStore: () => new DrizzleIdempotencyStore({ db: drizzle(sources().pool), table }),
    'TransactionHostIdempotencyStore (TypeORM adapter)': () => {
      const adapter = new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource });
      const txHost = new FakeTransactionHost<EntityManager>(adapter.optionsFactory(sources().dataSource));
      return new TransactionHostIdempotencyStore({ txHost, table });
    },
    'TransactionHostIdempotencyStore (Drizzle adapter)': () => {
      const adapter = new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: 'DRIZZLE' });
      const txHost = new FakeTransactionHost<NodePgDatabase>(
        adapter.optionsFactory(drizzle(sources().pool)) as unknown as ConstructorParameters<
          typeof FakeTransactionHost<NodePgDatabase>
        >[0],
      );
      return new TransactionHostIdempotencyStore({ txHost, table });
    },
  } satisfies Record<string, () => IdempotencyStore<unknown>>;
}

/** A suite's records table on the test database, with an admin pool, and the uncaught errors of the suite. */
export interface IdempotencyTable {
  table: string;
  /** A pool of one connection straight to the database (not through any proxy). */
  admin: pg.Pool;
  /** Errors that reached `process.on('uncaughtException')` during the suite. */
  uncaught: unknown[];
}

/** Creates, for the suite, the records table (`label`), records uncaught errors, and drops the table after. */
export function useIdempotencyTable(label: string): IdempotencyTable {
  const state: IdempotencyTable = { table: uniqueTable(label), admin: pgPool(1), uncaught: [] };
  const onUncaught = (error: unknown) => void state.uncaught.push(error);
  beforeAll(async () => {
    await new PostgresIdempotencyStore({ pool: state.admin, table: state.table }).migrate();
    process.on('uncaughtException', onUncaught);
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await state.admin.query(`DROP TABLE IF EXISTS ${state.table}`);
    await state.admin.end();
  });
  return state;
}

/** A suite's PostgreSQL behind a {@link PgProxy}: its pool and DataSource through the proxy, a table, the uncaught errors. */
export interface ProxiedPostgres extends PostgresSources, IdempotencyTable {
  proxy: PgProxy;
}

/**
 * Sets up, for the suite, a proxy in front of the test database, a pool of `max` connections and a TypeORM DataSource
 * through it, and the records table (`label`); records uncaught errors; tears it all down after. `poolErrors`: give
 * the pool an 'error' listener (idle connections only: a checked-out one has none but the store's).
 */
export function useProxiedPostgres(label: string, max: number, poolErrors: boolean): ProxiedPostgres {
  const state = useIdempotencyTable(label) as ProxiedPostgres;
  beforeAll(async () => {
    state.proxy = await PgProxy.start();
    state.pool = new pg.Pool({ connectionString: state.proxy.url, max });
    if (poolErrors) state.pool.on('error', () => undefined);
    state.dataSource = new DataSource({ type: 'postgres', url: state.proxy.url, poolSize: max, logging: false });
    await state.dataSource.initialize();
  });
  afterAll(async () => {
    await state.dataSource.destroy();
    await state.pool.end();
    await state.proxy.close();
  });
  return state;
}
