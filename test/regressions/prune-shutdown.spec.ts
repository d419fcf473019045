// Review (helper-159): every process with a SQL store now prunes it at each reaper run, and a prune held up by a table
// lock (a migration, `VACUUM FULL`) or a database out of reach held the application's shutdown for as long: the
// reaper's stop waited for its run. It now waits `shutdownTimeout` at most, then leaves the run to end on its own.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PostgresIdempotencyStore } from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { UniqueJobsReaper } from '../../lib/index.js';
import { startApp } from '../support/app.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('shutdown while a SQL prune waits for a table lock', () => {
  const pool = pgPool(3);
  const table = uniqueTable('idem_prune_lock');
  const store = new PostgresIdempotencyStore({ pool, table });
  beforeAll(() => store.migrate());
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  it('app.close() ends after shutdownTimeout, while the lock is still held', async () => {
    const app = await startApp({
      queue: uniqueName('prunelock'),
      module: { shutdownTimeout: 300, reaper: { interval: false }, idempotency: { store } },
      handler: async () => 1,
    });
    const locker = await pool.connect();
    let closed = false;
    try {
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      const run = app.moduleRef.get(UniqueJobsReaper).run();
      const waiting = async () => {
        const { rows } = await pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_locks WHERE relation = $1::regclass AND NOT granted',
          [table],
        );
        return rows[0].n;
      };
      await waitFor('the prune to wait for the table lock', async () => (await waiting()) > 0);
      await app.close();
      closed = true;
      expect(await waiting()).toBe(1); // closed while the prune still waits
      await locker.query('ROLLBACK');
      // The run ends on its own once the lock goes (its last step, on the closed Redis connection, fails).
      await run.catch(() => undefined);
    } finally {
      if (!closed) await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      if (!closed) await app.close();
    }
  });
});
