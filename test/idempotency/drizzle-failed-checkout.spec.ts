// A Drizzle store transaction whose own checkout failed, and the next one waiting behind it: pg-pool opens the next
// waiter's connection from the failed checkout's callback, in the failed transaction's asynchronous context. The
// library must watch that connection for the transaction that asked for it (review of session 19: a hook on the pool's
// 'acquire' gave it to the failed one, so the real owner's dropped BEGIN came back as a raw error, its client stayed
// checked out, and a pool of one was wedged for good).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { DrizzleIdempotencyStore, IdempotencyConnectionLostError } from '../../lib/index.js';
import { PgProxy } from '../support/pg-proxy.js';
import { useIdempotencyTable } from './postgres-store-kinds.js';

describe('a Drizzle transaction waiting behind one whose checkout failed', () => {
  const { table, uncaught } = useIdempotencyTable('drizzle_failed_checkout');
  let proxy: PgProxy;
  let pool: pg.Pool;

  beforeAll(async () => {
    proxy = await PgProxy.start();
    pool = new pg.Pool({ connectionString: proxy.url, max: 1, idleTimeoutMillis: 1 });
    pool.on('error', () => undefined);
  });

  afterAll(async () => {
    await proxy.close();
    await pool.end();
  });

  it('the second transaction’s dropped BEGIN is reported lost and its client given back', async () => {
    const store = new DrizzleIdempotencyStore({ db: drizzle(pool), table });
    const claim = (key: string) =>
      store.claim({ scope: 'z', key, owner: 'o', leaseMs: 60_000, fingerprint: undefined, jobId: '1' });
    expect(await claim('b')).toMatchObject({ claimed: true });
    expect(await claim('c')).toMatchObject({ claimed: true });
    // The pool drops its idle connection (idleTimeoutMillis 1), so that B opens a new one.
    if (pool.totalCount > 0) await new Promise((resolve) => pool.once('remove', resolve));
    expect(pool.totalCount).toBe(0);

    // B's new connection is cut at its startup message; C waits behind it (max 1).
    const startupCut = proxy.cutOn(/client_encoding/);
    const run = (key: string) =>
      store.runInTransaction(
        { scope: 'z', key, owner: 'o' },
        async () => 'ran',
        (v) => ({ result: JSON.stringify(v), ttlMs: 60_000 }),
      );
    const b = run('b');
    const c = run('c');
    await startupCut;
    // C's BEGIN (on the connection pg-pool opens for it from B's failure callback) is cut.
    const beginCut = proxy.cutOn(/begin/i);
    await expect(b).rejects.toThrow();
    await beginCut;
    const cError = await c.then(
      () => undefined,
      (e: unknown) => e,
    );
    // The pool works afterwards (the dropped client given back)?
    const probe = await pool.query('SELECT 1 AS one').then(() => 'answered');
    expect({
      uncaught,
      lost: cError instanceof IdempotencyConnectionLostError,
      probe,
      checkedOut: pool.totalCount - pool.idleCount,
    }).toEqual({ uncaught: [], lost: true, probe: 'answered', checkedOut: 0 });
  });
});
