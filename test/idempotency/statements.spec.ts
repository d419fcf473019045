// How many SQL statements a processed job costs on PostgreSQL, counted on the client side (every statement goes
// through pg.Client.prototype.query, whatever the ORM), per store and mode. The handler itself runs no statement.
// PostgreSQL pool store: plain mode 2 (claim, complete); transactional mode 4 (BEGIN, the claim inside the transaction,
// the result's update, COMMIT), 3 for a handler that returns nothing (the pool's adapter sees from the protocol that
// nothing ended the transaction, so the store sends no check). It was 5 while the claim came before the transaction and
// the transaction locked the record. The ORM stores, whose adapters cannot see the protocol, cost 4 either way: the
// completion checks the transaction id.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
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
  type SqlIdempotencyStore,
} from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { databaseUrl, pgPool, uniqueTable } from '../support/postgres.js';
import { FakeTransactionHost } from './fake-transaction-host.js';

describe('SQL statements per processed job (PostgreSQL)', () => {
  const apps = useApps('idem-statements');
  const pool = pgPool(6);
  const dataSource = new DataSource({ type: 'postgres', url: databaseUrl(), poolSize: 4, logging: false });
  const table = uniqueTable('idem_statements');
  const original = pg.Client.prototype.query;
  let statements = 0;

  beforeAll(async () => {
    await dataSource.initialize();
    await new PostgresIdempotencyStore({ pool, table }).migrate();
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      statements++;
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
  });

  afterAll(async () => {
    pg.Client.prototype.query = original;
    await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await Promise.all([pool.end(), dataSource.destroy()]);
  });

  /**
   * Label, store, transactional, statements per job when the handler returns a value, and when it returns nothing. The
   * ORM stores' transactional jobs count one statement after COMMIT: whether the transaction committed (the ORM commits
   * without showing PostgreSQL's answer, which is ROLLBACK for a transaction a failed statement aborted).
   */
  const stores: [string, () => SqlIdempotencyStore, boolean, number, number][] = [
    ['PostgresIdempotencyStore, plain', () => new PostgresIdempotencyStore({ pool, table }), false, 2, 2],
    ['PostgresIdempotencyStore, transactional', () => new PostgresIdempotencyStore({ pool, table }), true, 4, 3],
    ['TypeOrmIdempotencyStore, transactional', () => new TypeOrmIdempotencyStore({ dataSource, table }), true, 5, 5],
    [
      'DrizzleIdempotencyStore, transactional',
      () => new DrizzleIdempotencyStore({ db: drizzle(pool), table }),
      true,
      5,
      5,
    ],
    [
      'TransactionHostIdempotencyStore (TypeORM adapter), transactional',
      () =>
        new TransactionHostIdempotencyStore({
          txHost: new FakeTransactionHost<EntityManager>(
            new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }).optionsFactory(dataSource),
          ),
          table,
        }),
      true,
      5,
      5,
    ],
    [
      'TransactionHostIdempotencyStore (Drizzle adapter), transactional',
      () =>
        new TransactionHostIdempotencyStore({
          txHost: new FakeTransactionHost<NodePgDatabase>(
            new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: 'DRIZZLE' }).optionsFactory(
              drizzle(pool),
            ) as unknown as ConstructorParameters<typeof FakeTransactionHost<NodePgDatabase>>[0],
          ),
          table,
        }),
      true,
      5,
      5,
    ],
  ];

  it.each(stores)('%s: %#', async (_label, make, transactional, expected, withoutResult) => {
    let result: string | undefined = 'ok';
    const app = await apps.start({
      module: { idempotency: { stores: { sql: make() } } },
      idempotency: { key: (job) => (job.data as { key: string }).key, store: 'sql', transactional },
      handler: async () => result,
    });
    const perJob = async (label: string) => {
      const run = async (key: string) => {
        const job = await app.queue.add('effect', { key });
        expect(await app.finished(job)).toBe(result ?? null);
      };
      await run(`${label}-warm-up`); // the first statements of a fresh pool connection are not the job's
      const jobs = 20;
      statements = 0;
      for (let i = 0; i < jobs; i++) await run(`${label}-k${i}`);
      return statements / jobs;
    };
    expect(await perJob('result')).toBe(expected);
    // A handler that returns nothing: the record the claim wrote is the completion.
    result = undefined;
    expect(await perJob('none')).toBe(withoutResult);
  });
});
