// PostgresIdempotencyStore checks its transactions' clients out with pg.Pool's callback form (checkOutWatched): every
// way a checkout can fail (a timeout on a full pool, `verify` or `onConnect` refusing, an ended pool) rejects the
// attempt once, and the pool is whole afterwards.
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { useIdempotencyTable } from './postgres-store-kinds.js';
import { databaseUrl } from '../support/postgres.js';

describe('the claim transaction’s checkout, failing', () => {
  const { table, admin, uncaught } = useIdempotencyTable('checkout_failures');
  let n = 0;

  /** Claims a fresh key on `store` and runs a transaction on it; what it came to. */
  async function attempt(store: PostgresIdempotencyStore): Promise<string> {
    const ref = { scope: 'co', key: `k${n++}`, owner: 'o' };
    await new PostgresIdempotencyStore({ pool: admin, table }).claim({
      ...ref,
      leaseMs: 60_000,
      fingerprint: undefined,
      jobId: '1',
    });
    return store
      .runInTransaction(
        ref,
        async () => 'ran',
        (v) => ({ result: JSON.stringify(v), ttlMs: 60_000 }),
      )
      .then(
        (v) => `resolved ${v}`,
        (e: unknown) => `rejected ${(e as Error).message}`,
      );
  }

  it('connectionTimeoutMillis on a full pool: rejects once, and the pool is whole afterwards', async () => {
    // The one connection is opened without the short timeout (a loaded machine can take longer than 200 ms to open
    // one); the store's checkout, waiting for it, meets the timeout (pg-pool reads it at each checkout).
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 1, connectionTimeoutMillis: 30_000 });
    try {
      const held = await pool.connect();
      pool.options.connectionTimeoutMillis = 200;
      expect(await attempt(new PostgresIdempotencyStore({ pool, table }))).toMatch(/rejected timeout exceeded/);
      held.release();
      expect(await attempt(new PostgresIdempotencyStore({ pool, table }))).toBe('resolved ran');
      expect(pool.totalCount - pool.idleCount).toBe(0);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('verify failing, onConnect failing, and an ended pool: each rejects, nothing hangs', async () => {
    const verifying = new pg.Pool({
      connectionString: databaseUrl(),
      max: 1,
      verify: (_c: unknown, done: (e?: Error) => void) => done(new Error('verify said no')),
    });
    const hooked = new pg.Pool({
      connectionString: databaseUrl(),
      max: 1,
      // pg-pool awaits what onConnect returns (@types/pg types it as returning void).
      onConnect: (() => Promise.reject(new Error('onConnect said no'))) as unknown as () => void,
    });
    try {
      expect(await attempt(new PostgresIdempotencyStore({ pool: verifying, table }))).toMatch(/verify said no/);
      expect(await attempt(new PostgresIdempotencyStore({ pool: hooked, table }))).toMatch(/onConnect said no/);
    } finally {
      await Promise.all([verifying.end(), hooked.end()]);
    }
    const ended = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
    await ended.end();
    expect(await attempt(new PostgresIdempotencyStore({ pool: ended, table }))).toMatch(/after calling end/);
    expect(uncaught).toEqual([]);
  });
});
