// The PostgreSQL idempotency store against the shared contract: a table of its own per run (dropped afterwards), claims
// raced over two pools, and a handler table of the test's own to watch transactional writes commit or roll back.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { IdempotencyTransactionEndedError } from '../../lib/errors/idempotency-transaction-ended.error.js';
import {
  PostgresIdempotencyStore,
  type PgClientLike,
} from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { describeIdempotencyStoreContract } from '../../lib/ops/store-contract/index.js';

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

  // Review (helper-31): a plain claim meeting the uncommitted row of a holder over an ended record waited on its lock,
  // read the ended record, and spun (in progress with nothing to wait for) or failed after five tries.
  it.each(['in_progress', 'completed'] as const)(
    'a plain claim over an ended %s record held by an uncommitted claim: in progress, with the probe',
    async (state) => {
      const key = `ended-${state}`;
      if (state === 'in_progress') expect(await store.claim(request(key, 'dead', 1))).toMatchObject({ claimed: true });
      else {
        const won = await store.claimInTransaction(
          { ...request(key, 'old'), ttlMs: 1 },
          async () => undefined,
          () => ({ result: undefined, ttlMs: 1 }),
        );
        expect(won).toMatchObject({ claimed: true });
      }
      await pool.query('SELECT pg_sleep(0.01)'); // the lease or retention ends by the database's clock
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let started!: () => void;
      const working = new Promise<void>((resolve) => (started = resolve));
      const holder = store.claimInTransaction(
        request(key, 'holder'),
        async () => {
          started();
          await gate;
        },
        () => ({ result: undefined, ttlMs: 3_600_000 }),
      );
      await working;
      const plain = await peer.claim(request(key, 'plain'));
      expect(plain).toMatchObject({ claimed: false, record: { state: 'in_progress', owner: undefined } });
      if (plain.claimed) throw new Error('unreachable');
      expect(await plain.stillHeld?.()).toBe(true);
      release();
      await expect(holder).resolves.toMatchObject({ claimed: true });
      expect(await plain.stillHeld?.()).toBe(false);
    },
  );

  // Review (helper-31): the adapter read "nothing ended the transaction" while the handler's ROLLBACK was in flight.
  it('a ROLLBACK the work did not await, returning nothing: the attempt fails, nothing is committed', async () => {
    const failed = store.claimInTransaction(
      request('unawaited', 'a'),
      async (client) => {
        await client.query('SELECT 1');
        void client.query('ROLLBACK').catch(() => undefined);
      },
      () => ({ result: undefined, ttlMs: 3_600_000 }),
    );
    await expect(failed).rejects.toThrow('ended by a statement of the handler still in flight');
    expect(await store.get('cit', 'unawaited')).toBeUndefined();
    expect(await store.release({ scope: 'cit', key: 'unawaited', owner: 'a' })).toBe(true);
  });

  // Review (helper-31): the completion's statement, refused in the transaction the work began after committing the
  // claim's, surfaced as the database's error and the key was released instead of kept failed.
  it('COMMIT; BEGIN, then a refused statement caught, returning a value: IdempotencyTransactionEndedError (committed)', async () => {
    const ended = store.claimInTransaction(
      request('recommitted', 'a'),
      async (client) => {
        await client.query('COMMIT; BEGIN');
        await client.query('SELECT 1/0').catch(() => undefined);
        return 'v';
      },
      (value) => ({ result: JSON.stringify(value), ttlMs: 3_600_000 }),
    );
    await expect(ended).rejects.toBeInstanceOf(IdempotencyTransactionEndedError);
    await expect(ended).rejects.toMatchObject({ outcome: 'committed' });
    const error = JSON.stringify({ name: 'IdempotencyTransactionEndedError', message: 'committed' });
    expect(await store.fail({ scope: 'cit', key: 'recommitted', owner: 'a' }, { error, ttlMs: 60_000 })).toBe(true);
    expect(await store.get('cit', 'recommitted')).toMatchObject({ state: 'failed', owner: 'a' });
  });

  // Review (helper-31): a connection whose prepared statements were discarded failed every later transaction.
  it('a pooled connection that lost its prepared statements (DISCARD ALL) is replaced, the claim goes through', async () => {
    const single = pgPool(1);
    try {
      const lone = new PostgresIdempotencyStore({ pool: single, table });
      const once = (key: string) =>
        lone.claimInTransaction(
          request(key, `o-${key}`),
          async () => 'ok',
          (value) => ({ result: JSON.stringify(value), ttlMs: 3_600_000 }),
        );
      await expect(once('discard-1')).resolves.toMatchObject({ claimed: true });
      await single.query('DISCARD ALL');
      await expect(once('discard-2')).resolves.toMatchObject({ claimed: true });
      await expect(lone.get('cit', 'discard-2')).resolves.toMatchObject({ state: 'completed' });
    } finally {
      await single.end();
    }
  });

  // Review (helper-31): a wrapper that takes query(text, values) only got "A query must have either text or a name".
  it('a pool wrapper that takes query(text, values) only: no prepared statements by default', async () => {
    const wrapped = {
      query: (text: string, values?: unknown[]) => pool.query(text, values),
      connect: () => pool.connect(),
    };
    const plainStore = new PostgresIdempotencyStore({ pool: wrapped as unknown as pg.Pool, table });
    await plainStore.verify();
    await expect(plainStore.claim(request('wrapped', 'w'))).resolves.toEqual({ claimed: true, takeover: false });
  });

  // Review (helper-31): under REPEATABLE READ a contender's claim could fail with a serialization error (40001).
  it('under REPEATABLE READ, concurrent claims of one key win once and the others are told, none fails', async () => {
    const strict = [pool, otherPool].map(
      (p) => new PostgresIdempotencyStore({ pool: p, table, isolation: 'repeatable read' }),
    );
    for (let round = 0; round < 20; round++) {
      const key = `rr-${round}`;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          strict[i % 2].claimInTransaction(
            request(key, `rr-${round}-${i}`),
            async () => 'ok',
            (value) => ({ result: JSON.stringify(value), ttlMs: 3_600_000 }),
          ),
        ),
      );
      expect(answers.filter((answer) => answer.claimed)).toHaveLength(1);
    }
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
