// What the SQL stores meet outside their own making: a record table from the application's own migration that lacks
// the primary key on (scope, key) (every claim's ON CONFLICT needs it: the bootstrap check must fail, not every claim
// at run time), and a BullMQ job id holding NUL, which BullMQ accepts and PostgreSQL's text cannot hold.
import { afterAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { PostgresIdempotencyStore, SqliteIdempotencyStore } from '../../lib/index.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

const claimOf = (key: string, jobId = '1') => ({
  scope: 's',
  key,
  owner: randomUUID(),
  leaseMs: 10_000,
  fingerprint: 'f',
  jobId,
});
const withoutPrimaryKey = (sql: string) => {
  const changed = sql.replace(',\n  PRIMARY KEY (scope, key)', '');
  expect(changed).not.toBe(sql);
  return changed;
};

describe('SQL stores: a table without its primary key, and job ids PostgreSQL cannot store as they are', () => {
  const pool = pgPool(4);
  const tables: string[] = [];
  afterAll(async () => {
    for (const table of tables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  it('PostgreSQL: a table with every column but no primary key fails verify(), saying what to add', async () => {
    const table = uniqueTable('idem_nopk');
    tables.push(table);
    await pool.query(withoutPrimaryKey(PostgresIdempotencyStore.migrationSql(table)));
    const store = new PostgresIdempotencyStore({ pool, table });
    await expect(store.verify()).rejects.toThrow(
      `PostgresIdempotencyStore: its table "${table}" has every column but no primary key on (scope, key), which every claim needs`,
    );
    // What every claim would have met at run time, and what verify() saw.
    await expect(store.claim(claimOf('k'))).rejects.toThrow(/no unique or exclusion constraint/);
    await pool.query(`ALTER TABLE ${table} ADD PRIMARY KEY (scope, key)`);
    await expect(store.verify()).resolves.toBeUndefined();
    expect(Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0].n)).toBe(0);
  });

  it('SQLite: the same table fails verify()', async () => {
    const database = new Database(':memory:');
    try {
      database.exec(withoutPrimaryKey(SqliteIdempotencyStore.migrationSql('idem')));
      const store = new SqliteIdempotencyStore({ database, table: 'idem' });
      await expect(store.verify()).rejects.toThrow(
        'SqliteIdempotencyStore: its table "idem" has every column but no primary key on (scope, key)',
      );
      // Its message, not toThrow: better-sqlite3's error class may come from another test file's realm in this worker.
      await expect(store.claim(claimOf('k'))).rejects.toMatchObject({
        message: expect.stringMatching(/ON CONFLICT clause does not match/),
      });
    } finally {
      database.close();
    }
  });

  it('PostgreSQL: a job id holding NUL is claimed (plain and in a transaction), the id stored with NUL escaped', async () => {
    const table = uniqueTable('idem_nul');
    tables.push(table);
    const store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    const jobId = 'order\u0000 1';
    await expect(store.claim(claimOf('plain', jobId))).resolves.toEqual({ claimed: true, takeover: false });
    await expect(
      store.claimInTransaction(
        { ...claimOf('in-transaction', jobId), ttlMs: 10_000 },
        async () => 'ran',
        (value) => ({ result: JSON.stringify(value), ttlMs: 10_000 }),
      ),
    ).resolves.toEqual({ claimed: true, value: 'ran' });
    expect(await store.get('s', 'plain')).toMatchObject({ state: 'in_progress', jobId: 'order\\u0000 1' });
    expect(await store.get('s', 'in-transaction')).toMatchObject({ state: 'completed', result: '"ran"' });
  });
});
