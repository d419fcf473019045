// A connection terminated just as the pool hands it to the claim's transaction: `pg_terminate_backend` (a failover, an
// operator, a pooler) reaches a connection right after the reply to another caller's statement, in the same read. That
// caller's `pool.query` returns the connection to a full pool, the pool hands it straight to a waiting
// `pool.connect()` (removing its idle 'error' listener), and pg parses the FATAL before any continuation of the new
// owner runs: a store that watches the connection only once `await pool.connect()` resumes is too late, and the
// client's 'error' event, with no listener, ends the process (seen once in the fleet chaos scenario, stack only
// inside pg). A TCP proxy in front of PostgreSQL delivers the reply and the FATAL in one chunk, every time.
import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { IdempotencyConnectionLostError, PostgresIdempotencyStore, type IdempotencyStore } from '../../lib/index.js';
import { postgresStoreKinds, useProxiedPostgres } from './postgres-store-kinds.js';

describe('a connection terminated as the pool hands it to the claim transaction', () => {
  // One connection, so a transaction waits for the one another caller holds.
  const postgres = useProxiedPostgres('idem_handover', 1, true);
  const { table, uncaught } = postgres;

  /**
   * A store, a statement of another caller on the store's own pool, and what the attempt comes to. Every store checks
   * the transaction's client out so that it is watched from the hand-over: PostgresIdempotencyStore itself, Drizzle and
   * TypeORM through the `connect` the library gives their pool. Handed the terminated connection (another caller's
   * `pool.query` gives it back inside the reply), the store reports it lost. TypeORM's own callers give a runner's
   * connection back only once its release resolves, after pg parsed the FATAL: the pool has dropped that connection by
   * then, and the claim's transaction runs on a new one.
   */
  const kinds = postgresStoreKinds(() => postgres, table);
  const onPool = (sql: string) => postgres.pool.query(sql);
  const onDataSource = (sql: string) => postgres.dataSource.query(sql);
  const stores: [string, () => IdempotencyStore<unknown>, (sql: string) => Promise<unknown>, 'lost' | 'completed'][] = [
    ['PostgresIdempotencyStore', kinds.PostgresIdempotencyStore, onPool, 'lost'],
    [
      // An instrumentation wrapper that forwards every argument of connect (a callback included): `connect.length` is 0.
      'PostgresIdempotencyStore over a forwarding pool wrapper',
      () => {
        const forward =
          (method: 'query' | 'connect') =>
          (...args: unknown[]) =>
            (postgres.pool[method] as (...a: unknown[]) => unknown).apply(postgres.pool, args);
        const wrapper = { query: forward('query'), connect: forward('connect') } as unknown as pg.Pool;
        return new PostgresIdempotencyStore({ pool: wrapper, table });
      },
      onPool,
      'lost',
    ],
    ['DrizzleIdempotencyStore', kinds.DrizzleIdempotencyStore, onPool, 'lost'],
    [
      'TransactionHostIdempotencyStore (Drizzle adapter)',
      kinds['TransactionHostIdempotencyStore (Drizzle adapter)'],
      onPool,
      'lost',
    ],
    ['TypeOrmIdempotencyStore', kinds.TypeOrmIdempotencyStore, onDataSource, 'completed'],
    [
      // Another caller on TypeORM's own pg pool (`pool.query` gives its client back inside the reply).
      'TypeOrmIdempotencyStore, another caller on its pg pool',
      kinds.TypeOrmIdempotencyStore,
      (sql) => (postgres.dataSource.driver as unknown as { master: pg.Pool }).master.query(sql),
      'lost',
    ],
    [
      'TransactionHostIdempotencyStore (TypeORM adapter)',
      kinds['TransactionHostIdempotencyStore (TypeORM adapter)'],
      onDataSource,
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
      const terminated = postgres.proxy.terminateAfterReply(/handover_probe/);
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
