// A COMMIT that reaches PostgreSQL and commits, its answer lost on the way back (a proxy or a network cut between the
// reply and the client): the attempt is done, effect and completed record committed. Every PostgreSQL store asks the
// database on another connection what became of the claim's transaction and reports the attempt done, instead of a
// lost connection whose retry would replay it (and whose release would answer "released" for a completed key).
import { describe, expect, it } from '@jest/globals';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { postgresStoreKinds, useProxiedPostgres } from './postgres-store-kinds.js';

describe('the answer to the claim transaction’s COMMIT lost after PostgreSQL committed', () => {
  const postgres = useProxiedPostgres('idem_commit_lost', 3, true);
  const { table, uncaught } = postgres;

  it.each(Object.entries(postgresStoreKinds(() => postgres, table)))(
    '%s: the attempt is done, the record completed with its result',
    async (label, make) => {
      const store = make();
      const key = `${label.replace(/\W+/g, '-')}-k`;
      const cut = postgres.proxy.cutBeforeReply(/^Q[\s\S]{4}commit\b/i);
      const attempt = store.claimInTransaction(
        {
          scope: 'commit-lost',
          key,
          owner: 'first',
          leaseMs: 60_000,
          fingerprint: undefined,
          jobId: '1',
          ttlMs: 60_000,
        },
        async () => ({ charged: key }),
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      );
      await cut;
      await expect(attempt).resolves.toEqual({ claimed: true, value: { charged: key } });
      const committed = new PostgresIdempotencyStore({ pool: postgres.admin, table });
      expect(await committed.get('commit-lost', key)).toMatchObject({
        state: 'completed',
        result: JSON.stringify({ charged: key }),
      });
      expect(uncaught).toEqual([]);
    },
  );

  // The COMMIT still running when the connection goes (a deferred trigger here; a synchronous replica or a slow flush
  // in production): the store waits for PostgreSQL to finish it before it decides.
  it('PostgresIdempotencyStore: a COMMIT still running when its connection is lost is waited for, then done', async () => {
    const slow = `${table}_slow`;
    await postgres.admin.query(`CREATE TABLE ${slow} (id int)`);
    await postgres.admin.query(
      `CREATE FUNCTION ${slow}_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$`,
    );
    await postgres.admin.query(
      `CREATE CONSTRAINT TRIGGER ${slow}_trg AFTER INSERT ON ${slow} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${slow}_fn()`,
    );
    try {
      const store = new PostgresIdempotencyStore({ pool: postgres.pool, table });
      const cut = postgres.proxy.cutAfterSending(/^Q[\s\S]{4}commit\b/i);
      const attempt = store.claimInTransaction(
        {
          scope: 'commit-running',
          key: 'k',
          owner: 'first',
          leaseMs: 60_000,
          fingerprint: undefined,
          jobId: '1',
          ttlMs: 60_000,
        },
        async (client) => {
          await client.query(`INSERT INTO ${slow} (id) VALUES (1)`); // its trigger runs at COMMIT
          return 'charged';
        },
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      );
      await cut;
      await expect(attempt).resolves.toEqual({ claimed: true, value: 'charged' });
      expect(Number((await postgres.admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${slow}`)).rows[0].n)).toBe(
        1,
      );
      const committed = new PostgresIdempotencyStore({ pool: postgres.admin, table });
      expect(await committed.get('commit-running', 'k')).toMatchObject({ state: 'completed' });
    } finally {
      await postgres.admin.query(`DROP TABLE IF EXISTS ${slow}`);
      await postgres.admin.query(`DROP FUNCTION IF EXISTS ${slow}_fn()`);
    }
  });
});
