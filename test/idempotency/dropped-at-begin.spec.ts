// A connection dropped while the transaction's BEGIN is in flight (a failover, a network cut): every PostgreSQL store
// and adapter watches the transaction's connection from the moment it is checked out, so the attempt fails with
// IdempotencyConnectionLostError instead of the process ending on an unhandled 'error' event of the pg client (Drizzle
// leaves the client it checks out without a listener). A TCP proxy in front of PostgreSQL cuts the connection when the
// client sends BEGIN; the store keeps working on healthy connections afterwards.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TransactionalAdapterDrizzleOrm } from '@nestjs-cls/transactional-adapter-drizzle-orm';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  DrizzleIdempotencyStore,
  IdempotencyConnectionLostError,
  PostgresIdempotencyStore,
  TransactionHostIdempotencyStore,
  TypeOrmIdempotencyStore,
  type IdempotencyStore,
} from '../../lib/index.js';
import { PgProxy } from '../support/pg-proxy.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { FakeTransactionHost } from './fake-transaction-host.js';

describe('the connection dropped during BEGIN of the claim transaction', () => {
  const table = uniqueTable('idem_begin');
  let proxy: PgProxy;
  let pool: pg.Pool;
  let dataSource: DataSource;
  const admin = pgPool(1);
  const uncaught: unknown[] = [];
  const onUncaught = (error: unknown) => void uncaught.push(error);

  beforeAll(async () => {
    proxy = await PgProxy.start();
    // No pool.on('error'): only the store's own listeners stand between a dropped connection and the process.
    pool = new pg.Pool({ connectionString: proxy.url, max: 3 });
    dataSource = new DataSource({ type: 'postgres', url: proxy.url, poolSize: 3, logging: false });
    await dataSource.initialize();
    await new PostgresIdempotencyStore({ pool: admin, table }).migrate();
    process.on('uncaughtException', onUncaught);
  });

  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await admin.query(`DROP TABLE IF EXISTS ${table}`);
    await dataSource.destroy();
    await Promise.all([pool.end(), admin.end()]);
    await proxy.close();
  });

  const stores: [string, () => IdempotencyStore<unknown>][] = [
    ['PostgresIdempotencyStore', () => new PostgresIdempotencyStore({ pool, table })],
    ['TypeOrmIdempotencyStore', () => new TypeOrmIdempotencyStore({ dataSource, table })],
    ['DrizzleIdempotencyStore', () => new DrizzleIdempotencyStore({ db: drizzle(pool), table })],
    [
      'TransactionHostIdempotencyStore (TypeORM adapter)',
      () => {
        const adapter = new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource });
        const txHost = new FakeTransactionHost<EntityManager>(adapter.optionsFactory(dataSource));
        return new TransactionHostIdempotencyStore({ txHost, table });
      },
    ],
    [
      'TransactionHostIdempotencyStore (Drizzle adapter)',
      () => {
        const adapter = new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: 'DRIZZLE' });
        const txHost = new FakeTransactionHost<NodePgDatabase>(
          adapter.optionsFactory(drizzle(pool)) as unknown as ConstructorParameters<
            typeof FakeTransactionHost<NodePgDatabase>
          >[0],
        );
        return new TransactionHostIdempotencyStore({ txHost, table });
      },
    ],
  ];

  it.each(stores)(
    '%s: IdempotencyConnectionLostError, the handler never ran, the process lives on',
    async (label, make) => {
      const store = make();
      const key = `${label.replace(/\W+/g, '-')}-k`;
      const claim = (owner: string) =>
        store.claim({ scope: 'begin', key, owner, leaseMs: 60_000, fingerprint: undefined, jobId: '1' });
      expect(await claim('first')).toEqual({ claimed: true, takeover: false });
      const cut = proxy.cutOn(/^Q[\s\S]{4}(begin|start transaction)/i);
      let ran = false;
      const attempt = store.runInTransaction!(
        { scope: 'begin', key, owner: 'first' },
        async () => {
          ran = true;
          return 'x';
        },
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      );
      await cut;
      await expect(attempt).rejects.toBeInstanceOf(IdempotencyConnectionLostError);
      await expect(attempt).rejects.toMatchObject({ scope: 'begin', key });
      expect(ran).toBe(false);
      expect(uncaught).toEqual([]);
      // Nothing changed: the claim is still the first owner's; released, the key runs on a healthy connection.
      expect(await store.get('begin', key)).toMatchObject({ state: 'in_progress', owner: 'first' });
      expect(await store.release({ scope: 'begin', key, owner: 'first' })).toBe(true);
      expect(await claim('second')).toEqual({ claimed: true, takeover: false });
      const value = await store.runInTransaction!(
        { scope: 'begin', key, owner: 'second' },
        async () => 'ok',
        (v) => ({ result: JSON.stringify(v), ttlMs: 60_000 }),
      );
      expect(value).toBe('ok');
      expect(await store.get('begin', key)).toMatchObject({ state: 'completed', result: '"ok"' });
      expect(uncaught).toEqual([]);
    },
  );
});
