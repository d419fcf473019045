// `migrate()` whose connection is cut under it: its COMMIT's answer lost after PostgreSQL committed, or cut while
// PostgreSQL still runs it, or cut before the COMMIT was sent. It only creates what is missing, so it runs again on
// another connection and resolves with the table and its primary key in place (it used to reject, as if nothing had
// been created, whatever the server did).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { PgProxy } from '../support/pg-proxy.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

describe('migrate() when its connection is cut', () => {
  const admin = pgPool(1);
  const tables: string[] = [];
  let proxy: PgProxy;
  let pool: pg.Pool;

  beforeAll(async () => {
    proxy = await PgProxy.start();
    pool = new pg.Pool({ connectionString: proxy.url, max: 2 });
    pool.on('error', () => undefined); // an idle connection the proxy cut
  });
  afterAll(async () => {
    for (const table of tables) await admin.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
    await proxy.close();
    await admin.end();
  });

  it.each([
    ['its COMMIT committed, the answer lost', (p: PgProxy) => p.cutBeforeReply(/COMMIT/)],
    ['its COMMIT sent, the connection cut while it runs', (p: PgProxy) => p.cutAfterSending(/COMMIT/)],
    ['cut at its first CREATE', (p: PgProxy) => p.cutOn(/CREATE TABLE/)],
  ])('%s: it resolves, the table usable', async (_label, fault) => {
    const table = uniqueTable('migrate_cut');
    tables.push(table);
    const store = new PostgresIdempotencyStore({ pool, table });
    const faulted = fault(proxy);
    await store.migrate();
    await faulted; // the fault did happen
    await store.verify();
    const claim = await store.claim({
      scope: 's',
      key: 'k',
      owner: 'o',
      leaseMs: 60_000,
      fingerprint: undefined,
      jobId: '1',
    });
    expect(claim.claimed).toBe(true);
    const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
    expect(rows[0].n).toBe('1');
  });
});
