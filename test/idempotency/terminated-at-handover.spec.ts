// A connection terminated just as the pool hands it to the claim's transaction: `pg_terminate_backend` (a failover, an
// operator, a pooler) reaches a connection right after the reply to another caller's statement, in the same read. That
// caller's `pool.query` returns the connection to a full pool, the pool hands it straight to a waiting
// `pool.connect()` (removing its idle 'error' listener), and pg parses the FATAL before any continuation of the new
// owner runs: a store that watches the connection only once `await pool.connect()` resumes is too late, and the
// client's 'error' event, with no listener, ends the process (seen once in the fleet chaos scenario, stack only
// inside pg). A TCP proxy in front of PostgreSQL delivers the reply and the FATAL in one chunk, every time.
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

describe('a connection terminated as the pool hands it to the claim transaction', () => {
  const table = uniqueTable('idem_handover');
  let proxy: PgProxy;
  let pool: pg.Pool;
  let dataSource: DataSource;
  const admin = pgPool(1);
  const uncaught: unknown[] = [];
  const onUncaught = (error: unknown) => void uncaught.push(error);

  beforeAll(async () => {
    proxy = await PgProxy.start();
    // One connection, so a transaction waits for the one another caller holds. The pool's own 'error' listener only
    // hears idle connections; the handed-over one has none but the store's.
    pool = new pg.Pool({ connectionString: proxy.url, max: 1 });
    pool.on('error', () => undefined);
    dataSource = new DataSource({ type: 'postgres', url: proxy.url, poolSize: 1, logging: false });
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

  /**
   * A store, a statement of another caller on the store's own pool, and what the attempt comes to. PostgresIdempotencyStore
   * is handed the terminated connection (another caller's `pool.query` gives it back inside the reply) and reports it
   * lost. TypeORM gives a runner's connection back only once its release resolves, after pg parsed the FATAL: the pool
   * has dropped that connection by then, and the claim's transaction runs on a new one; a caller of TypeORM's pg pool
   * itself hands it over at once, and the store watches its checkout from the hand-over.
   * Drizzle checks the transaction's client out itself: handed over in the other caller's context, the client is
   * guarded from the hand-over and becomes the store's when Drizzle sends BEGIN on it from the store's context.
   */
  const stores: [string, () => IdempotencyStore<unknown>, (sql: string) => Promise<unknown>, 'lost' | 'completed'][] = [
    ['PostgresIdempotencyStore', () => new PostgresIdempotencyStore({ pool, table }), (sql) => pool.query(sql), 'lost'],
    [
      // An instrumentation wrapper that forwards every argument of connect (a callback included): `connect.length` is 0.
      'PostgresIdempotencyStore over a forwarding pool wrapper',
      () => {
        const forward =
          (method: 'query' | 'connect') =>
          (...args: unknown[]) =>
            (pool[method] as (...a: unknown[]) => unknown).apply(pool, args);
        const wrapper = { query: forward('query'), connect: forward('connect') } as unknown as pg.Pool;
        return new PostgresIdempotencyStore({ pool: wrapper, table });
      },
      (sql) => pool.query(sql),
      'lost',
    ],
    [
      'DrizzleIdempotencyStore',
      () => new DrizzleIdempotencyStore({ db: drizzle(pool), table }),
      (sql) => pool.query(sql),
      'lost',
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
      (sql) => pool.query(sql),
      'lost',
    ],
    [
      'TypeOrmIdempotencyStore',
      () => new TypeOrmIdempotencyStore({ dataSource, table }),
      (sql) => dataSource.query(sql),
      'completed',
    ],
    [
      // Another caller on TypeORM's own pg pool (`pool.query` gives its client back inside the reply).
      'TypeOrmIdempotencyStore, another caller on its pg pool',
      () => new TypeOrmIdempotencyStore({ dataSource, table }),
      (sql) => (dataSource.driver as unknown as { master: pg.Pool }).master.query(sql),
      'lost',
    ],
    [
      'TransactionHostIdempotencyStore (TypeORM adapter)',
      () => {
        const adapter = new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource });
        const txHost = new FakeTransactionHost<EntityManager>(adapter.optionsFactory(dataSource));
        return new TransactionHostIdempotencyStore({ txHost, table });
      },
      (sql) => dataSource.query(sql),
      'completed',
    ],
  ];

  it.each(stores)(
    '%s: the attempt is lost or runs on a new connection, never both, and the process lives on',
    async (label, make, statement, outcome) => {
      const store = make();
      const key = `${label.replace(/\W+/g, '-')}-k`;
      const claim = (owner: string) =>
        store.claim({ scope: 'handover', key, owner, leaseMs: 60_000, fingerprint: undefined, jobId: '1' });
      expect(await claim('first')).toEqual({ claimed: true, takeover: false });
      const terminated = proxy.terminateAfterReply(/handover_probe/);
      const busy = statement(`SELECT 'handover_probe' AS probe`);
      let ran = false;
      const attempt = store.runInTransaction!(
        { scope: 'handover', key, owner: 'first' },
        async () => {
          ran = true;
          return 'x';
        },
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      );
      await terminated;
      await expect(busy).resolves.toBeDefined();
      if (outcome === 'completed') {
        await expect(attempt).resolves.toBe('x');
        expect(ran).toBe(true);
        expect(uncaught).toEqual([]);
        expect(await store.get('handover', key)).toMatchObject({ state: 'completed', result: '"x"' });
        return;
      }
      await expect(attempt).rejects.toBeInstanceOf(IdempotencyConnectionLostError);
      expect(ran).toBe(false);
      expect(uncaught).toEqual([]);
      // Nothing changed: the claim is still the first owner's; released, the key runs on a new connection.
      expect(await store.get('handover', key)).toMatchObject({ state: 'in_progress', owner: 'first' });
      expect(await store.release({ scope: 'handover', key, owner: 'first' })).toBe(true);
      expect(await claim('second')).toEqual({ claimed: true, takeover: false });
      const value = await store.runInTransaction!(
        { scope: 'handover', key, owner: 'second' },
        async () => 'ok',
        (v) => ({ result: JSON.stringify(v), ttlMs: 60_000 }),
      );
      expect(value).toBe('ok');
      expect(await store.get('handover', key)).toMatchObject({ state: 'completed', result: '"ok"' });
      expect(uncaught).toEqual([]);
    },
  );
});
