// A connection dropped while the transaction's BEGIN is in flight (a failover, a network cut): every PostgreSQL store
// and adapter watches the transaction's connection from the moment it is checked out, so the attempt fails with
// IdempotencyConnectionLostError instead of the process ending on an unhandled 'error' event of the pg client (Drizzle
// leaves the client it checks out without a listener). A TCP proxy in front of PostgreSQL cuts the connection when the
// client sends BEGIN; the store keeps working on healthy connections afterwards.
import { describe, expect, it } from '@jest/globals';
import { IdempotencyConnectionLostError } from '../../lib/index.js';
import { postgresStoreKinds, useProxiedPostgres } from './postgres-store-kinds.js';

describe('the connection dropped during BEGIN of the claim transaction', () => {
  // No pool 'error' listener: only the store's own listeners stand between a dropped connection and the process.
  const postgres = useProxiedPostgres('idem_begin', 3, false);
  const { table, uncaught } = postgres;

  const stores = Object.entries(postgresStoreKinds(() => postgres, table));

  it.each(stores)(
    '%s: IdempotencyConnectionLostError, the handler never ran, the process lives on',
    async (label, make) => {
      const store = make();
      const key = `${label.replace(/\W+/g, '-')}-k`;
      const claim = (owner: string) =>
        store.claim({ scope: 'begin', key, owner, leaseMs: 60_000, fingerprint: undefined, jobId: '1' });
      expect(await claim('first')).toEqual({ claimed: true, takeover: false });
      const cut = postgres.proxy.cutOn(/^Q[\s\S]{4}(begin|start transaction)/i);
      let ran = false;
      const attempt = store.runInTransaction(
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
      const value = await store.runInTransaction(
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
