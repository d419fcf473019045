// PostgresIdempotencyStore in transactional mode against what a hostile review tried on a version that batched its
// statements (values written into the SQL text, reverted since): values that an escaping function lets out of their
// literal under a multibyte client_encoding, a failure of the handler's own at COMMIT that looks like the store's, and
// a client that sends every query as a prepared statement. The store sends every value as a parameter.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  PostgresIdempotencyStore,
  type PgClientLike,
  type PgPoolLike,
} from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

describe('PostgresIdempotencyStore, transactional mode, hostile settings', () => {
  const pools: pg.Pool[] = [];
  const tables: string[] = [];
  const admin = pgPool(2);

  afterAll(async () => {
    for (const table of tables) await admin.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await Promise.all([...pools.map((pool) => pool.end()), admin.end()]);
  });

  const setup = async (configure?: (pool: pg.Pool) => void) => {
    const pool = pgPool(3);
    pools.push(pool);
    configure?.(pool);
    const table = uniqueTable('idem_hostile');
    const effects = uniqueTable('fx_hostile');
    tables.push(table, effects);
    await admin.query(`CREATE TABLE ${effects} (key text PRIMARY KEY, v int NOT NULL DEFAULT 1)`);
    const store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    return { pool, store, table, effects };
  };

  /** A claim, then the transaction writing one effect row, as a transactional worker does. */
  const runOnce = async (
    store: PostgresIdempotencyStore,
    key: string,
    work: (client: PgClientLike) => Promise<unknown>,
  ) => {
    const ref = { scope: 's', key, owner: randomUUID() };
    const claim = await store.claim({
      ...ref,
      leaseMs: 30_000,
      fingerprint: undefined,
      jobId: '1',
      transactional: true,
    });
    expect(claim.claimed).toBe(true);
    return store.runInTransaction(ref, work, (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }));
  };

  it('a key and a result under client_encoding SJIS with backslash_quote on stay inside their values', async () => {
    const { store, effects } = await setup((pool) =>
      pool.on('connect', (client) => void client.query("SET client_encoding = 'SJIS'; SET backslash_quote = on")),
    );
    const victim = uniqueTable('victim');
    tables.push(victim);
    await admin.query(`CREATE TABLE ${victim} (id int)`);
    // Parameters never are literals: a quote, a backslash or a statement in a value stays in the value. (pg sends
    // parameters as UTF-8 whatever client_encoding says, so under SJIS only ASCII values arrive unchanged: a caveat of
    // the driver's, not of the store's.)
    const key = `\\'; COMMIT; DROP TABLE ${victim}; --`;
    const result = { text: `\\'); COMMIT; DROP TABLE ${victim}; --`, dollar: '$1 $$ $tag$' };
    const value = await runOnce(store, key, async (client) => {
      await client.query(`INSERT INTO ${effects} (key) VALUES ('one')`);
      return result;
    });
    expect(value).toEqual(result);
    expect((await admin.query<{ t: string | null }>(`SELECT to_regclass($1) AS t`, [victim])).rows[0].t).not.toBeNull();
    const stored = await admin.query(`SELECT state, result FROM ${pg.escapeIdentifier(store.table)} WHERE key = $1`, [
      key,
    ]);
    expect(stored.rows).toEqual([{ state: 'completed', result: JSON.stringify(result) }]);
    expect((await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${effects}`)).rows[0].n).toBe(1);
  });

  it("a division by zero of the handler's own (a deferred trigger at COMMIT) is its own error, nothing committed", async () => {
    const { store, table, effects } = await setup();
    await admin.query(`
      CREATE FUNCTION ${effects}_check() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM 1 / (NEW.v - NEW.v); RETURN NEW; END $$;
      CREATE CONSTRAINT TRIGGER ${effects}_late AFTER INSERT ON ${effects}
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${effects}_check();`);
    try {
      const outcome = await runOnce(store, 'deferred', async (client) => {
        await client.query(`INSERT INTO ${effects} (key) VALUES ('deferred')`);
        return 'done';
      }).catch((error: unknown) => error);
      expect(outcome).toMatchObject({ code: '22012' });
      expect((outcome as Error).constructor.name).not.toBe('IdempotencyTransactionEndedError');
      expect((await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${effects}`)).rows[0].n).toBe(0);
      // Still the claim's, in progress: the runner releases it after a failure like this one (nothing committed).
      expect(await store.get('s', 'deferred')).toMatchObject({ state: 'in_progress' });
      expect(
        (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE state = 'completed'`)).rows[0]
          .n,
      ).toBe(0);
    } finally {
      await admin.query(`DROP FUNCTION ${effects}_check() CASCADE`);
    }
  });

  it('the bootstrap check: a session the server ends under it (pg_terminate_backend) is retried on another; one ended every time is named for what it is', async () => {
    const { table } = await setup();
    /** A pool whose first `ending` connections are ended by the server as their first query runs. */
    const endingPool = (ending: number) => {
      const pool = pgPool(2);
      pools.push(pool);
      pool.on('error', () => undefined); // the ended sessions' clients, once idle
      let ended = 0;
      pool.on('connect', (client) => {
        client.on('error', () => undefined);
        if (ended++ < ending) void client.query('SELECT pg_terminate_backend(pg_backend_pid())').catch(() => undefined);
      });
      return pool;
    };
    await expect(new PostgresIdempotencyStore({ pool: endingPool(1), table }).verify()).resolves.toBeUndefined();
    await expect(new PostgresIdempotencyStore({ pool: endingPool(Infinity), table }).verify()).rejects.toThrow(
      `PostgresIdempotencyStore lost its connection while checking its table "${table}", 4 times`,
    );
  });

  it('a client that sends every query as a prepared statement works as pg does', async () => {
    const { pool, effects } = await setup();
    let calls = 0;
    // A wrapper that forces pg's extended protocol (as some instrumentation and proxies do).
    const extended = (client: pg.PoolClient): PgClientLike => ({
      query: ((query: string | pg.QueryConfig, values?: unknown[]) => {
        calls++;
        const config = typeof query === 'string' ? { text: query, values: values ?? [] } : query;
        return client.query({ ...config, queryMode: 'extended' } as pg.QueryConfig);
      }) as PgClientLike['query'],
      release: (destroy?: boolean | Error) => client.release(destroy),
    });
    const wrapped: PgPoolLike = {
      query: ((query: string | pg.QueryConfig, values?: unknown[]) =>
        typeof query === 'string' ? pool.query(query, values) : pool.query(query)) as PgPoolLike['query'],
      connect: async () => extended(await pool.connect()),
    };
    const store = new PostgresIdempotencyStore({ pool: wrapped, table: uniqueTable('idem_extended') });
    tables.push(store.table);
    await store.migrate();
    for (const key of ['first', 'second']) {
      calls = 0;
      await expect(
        runOnce(store, key, async (client) => client.query(`INSERT INTO ${effects} (key) VALUES ($1)`, [key])),
      ).resolves.toBeDefined();
      expect(await store.get('s', key)).toMatchObject({ state: 'completed' });
      // BEGIN, the lock, the effect, the completion, COMMIT.
      expect(calls).toBe(5);
    }
    expect((await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${effects}`)).rows[0].n).toBe(2);
  });
});
