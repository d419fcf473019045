// The PostgreSQL idempotency store against the shared contract: a table of its own per run (dropped afterwards), claims
// raced over two pools, and a handler table of the test's own to watch transactional writes commit or roll back.
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
