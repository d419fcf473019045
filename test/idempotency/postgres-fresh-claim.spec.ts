// The transactional claim tries a plain insert first (a key with no record): it must keep the full claim's promise that
// a duplicate never waits on the row lock of the live record that stops it (here, another transaction's uncommitted
// UPDATE of that record). Found by the review of the plain-insert-first claim.
import { afterAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

/** Longer than any answer that does not wait on the row lock, on a loaded machine. */
const BLOCKED_AFTER_MS = 10_000;

describe('PostgreSQL transactional claim of a key with a record', () => {
  const pool = pgPool(4);
  const table = uniqueTable('idem_fresh_claim');

  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await pool.end();
  });

  it('a duplicate of a live record answers while another transaction holds an uncommitted UPDATE of it', async () => {
    const store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    const request = (owner: string) => ({
      scope: 's',
      key: 'k',
      owner,
      leaseMs: 60_000,
      fingerprint: 'f',
      jobId: owner,
      ttlMs: 60_000,
    });
    expect(await store.claim(request('plain'))).toEqual({ claimed: true, takeover: false });

    // A transaction updating the live record (it holds no advisory lock of the key), open until the claim answers.
    const other = await pool.connect();
    await other.query('BEGIN');
    await other.query(`UPDATE ${pg.escapeIdentifier(table)} SET updated_at = clock_timestamp() WHERE key = 'k'`);
    let timer: NodeJS.Timeout | undefined;
    try {
      const answer = store.claimInTransaction(
        request('duplicate'),
        async () => 'ran',
        () => ({ result: undefined, ttlMs: 60_000 }),
      );
      const blocked = new Promise<'blocked'>((resolve) => {
        timer = setTimeout(() => resolve('blocked'), BLOCKED_AFTER_MS);
      });
      const outcome = await Promise.race([answer, blocked]);
      expect(outcome).toMatchObject({ claimed: false, record: { state: 'in_progress', owner: 'plain' } });
    } finally {
      clearTimeout(timer);
      await other.query('COMMIT');
      other.release();
    }
  }, 30_000);
});
