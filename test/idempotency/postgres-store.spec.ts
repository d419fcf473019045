// The PostgreSQL idempotency store against the shared contract: a table of its own per run (dropped afterwards), claims
// raced over two pools, and a handler table of the test's own to watch transactional writes commit or roll back.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  PostgresIdempotencyStore,
  type PgClientLike,
} from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { describeIdempotencyStoreContract } from './store-contract.js';

describeIdempotencyStoreContract<PgClientLike>('postgres', {
  transactional: true,
  async create() {
    const pool = pgPool(10);
    const otherPool = pgPool(5);
    const table = uniqueTable('idem_contract');
    const probeTable = uniqueTable('idem_contract_probe');
    const cleanup = async () => {
      try {
        await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}, ${pg.escapeIdentifier(probeTable)}`);
      } finally {
        await Promise.all([pool.end(), otherPool.end()]);
      }
    };
    try {
      const store = new PostgresIdempotencyStore({ pool, table });
      await store.migrate();
      const peer = new PostgresIdempotencyStore({ pool: otherPool, table });
      await peer.migrate();
      await pool.query(`CREATE TABLE ${pg.escapeIdentifier(probeTable)} (marker text NOT NULL)`);
      return {
        store,
        peers: [peer],
        probe: {
          async write(transaction: PgClientLike, marker: string) {
            await transaction.query(`INSERT INTO ${pg.escapeIdentifier(probeTable)} (marker) VALUES ($1)`, [marker]);
          },
          async count(marker: string) {
            const { rows } = await pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(probeTable)} WHERE marker = $1`,
              [marker],
            );
            return rows[0].n;
          },
        },
        cleanup,
      };
    } catch (error) {
      await cleanup();
      throw error;
    }
  },
});

// PostgreSQL claims inside the handler's transaction: nothing is committed before the work's writes, so a claimant of
// the same key meanwhile is told the key is in progress by a holder it cannot name (the key's advisory lock), and
// nothing of the claim blocks the table (a bootstrap's migration, a claim outside a transaction).
describe('PostgreSQL claimInTransaction', () => {
  let pool: pg.Pool;
  let otherPool: pg.Pool;
  let store: PostgresIdempotencyStore;
  let peer: PostgresIdempotencyStore;
  const table = uniqueTable('idem_cit');
  const request = (key: string, owner: string, leaseMs = 60_000) => ({
    scope: 'cit',
    key,
    owner,
    leaseMs,
    fingerprint: `fp-${key}`,
    jobId: `job-${owner}`,
    ttlMs: 3_600_000,
  });

  beforeAll(async () => {
    pool = pgPool(5);
    otherPool = pgPool(5);
    store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    peer = new PostgresIdempotencyStore({ pool: otherPool, table });
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await Promise.all([pool.end(), otherPool.end()]);
  });

  it('while a holder works: claims answer in progress with a probe, migrate does not wait, and all see the commit', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const working = new Promise<void>((resolve) => (started = resolve));
    const holder = store.claimInTransaction(
      request('k', 'holder'),
      async () => {
        started();
        await gate;
        return 'done';
      },
      (value) => ({ result: JSON.stringify(value), ttlMs: 3_600_000 }),
    );
    await working;

    let ran = false;
    const contender = await peer.claimInTransaction(
      request('k', 'contender', 5_000),
      async () => {
        ran = true;
      },
      () => ({ result: undefined, ttlMs: 3_600_000 }),
    );
    expect(ran).toBe(false);
    expect(contender).toMatchObject({
      claimed: false,
      record: { state: 'in_progress', owner: undefined, jobId: undefined },
      expiresInMs: 5_000,
    });
    if (contender.claimed) throw new Error('unreachable');
    expect(await contender.stillHeld?.()).toBe(true);
    // A claim outside a transaction meets the uncommitted row: told the same, after its bounded lock wait.
    const plain = await peer.claim(request('k', 'plain'));
    expect(plain).toMatchObject({ claimed: false, record: { state: 'in_progress', owner: undefined } });
    expect(await peer.get('cit', 'k')).toBeUndefined();
    // A bootstrap's migration reads the catalog instead of taking a lock behind the holder's transaction.
    await peer.migrate();

    release();
    await expect(holder).resolves.toEqual({ claimed: true, value: 'done' });
    expect(await contender.stillHeld?.()).toBe(false);
    const after = await peer.claimInTransaction(
      request('k', 'late'),
      async () => 'ran',
      () => ({ result: undefined, ttlMs: 3_600_000 }),
    );
    expect(after).toMatchObject({ claimed: false, record: { state: 'completed', owner: 'holder', result: '"done"' } });
  });

  it('takes over an in_progress claim of plain mode whose lease ended: takeover, one more attempt', async () => {
    expect(await store.claim(request('t', 'first', 1))).toEqual({ claimed: true, takeover: false });
    // The lease (1 ms) ends by the database's clock.
    await pool.query('SELECT pg_sleep(0.01)');
    const seen: unknown[] = [];
    const answer = await peer.claimInTransaction(
      request('t', 'second'),
      async (_tx, claim) => {
        seen.push(claim);
        return 1;
      },
      () => ({ result: undefined, ttlMs: 3_600_000 }),
    );
    expect(answer).toEqual({ claimed: true, value: 1 });
    expect(seen).toEqual([{ takeover: true, uncommitted: true }]);
    expect(await store.get('cit', 't')).toMatchObject({ state: 'completed', owner: 'second', attempts: 2 });
  });
});
