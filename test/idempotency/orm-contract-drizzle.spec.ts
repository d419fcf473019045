// DrizzleIdempotencyStore (node-postgres and better-sqlite3) and TransactionHostIdempotencyStore on the Drizzle adapter
// of @nestjs-cls/transactional (PostgreSQL), against the shared store contract. The probe writes through the handle
// runInTransaction gives the handler: Drizzle's `tx` (PostgreSQL) or the database in its transaction (SQLite).
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TransactionalAdapterDrizzleOrm } from '@nestjs-cls/transactional-adapter-drizzle-orm';
import { sql } from 'drizzle-orm';
import { drizzle as drizzleSqlite, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { DrizzleIdempotencyStore, TransactionHostIdempotencyStore, type IdempotencyStore } from '../../lib/index.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { FakeTransactionHost } from './fake-transaction-host.js';
import { describeIdempotencyStoreContract } from '../../lib/ops/store-contract/index.js';

/** What runInTransaction hands the handler on PostgreSQL: Drizzle's transaction, which has `execute`. */
type PgTx = Pick<NodePgDatabase, 'execute'>;

async function postgresFixture(make: (db: NodePgDatabase, table: string) => IdempotencyStore<PgTx>) {
  const pool = pgPool(10);
  const otherPool = pgPool(5);
  const table = uniqueTable('idem_drizzle');
  const probe = uniqueTable('idem_drizzle_probe');
  const cleanup = async () => {
    try {
      await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}, ${pg.escapeIdentifier(probe)}`);
    } finally {
      await Promise.all([pool.end(), otherPool.end()]);
    }
  };
  try {
    const store = make(drizzlePg(pool), table);
    await (store as DrizzleIdempotencyStore<NodePgDatabase>).migrate();
    await pool.query(`CREATE TABLE ${probe} (marker text NOT NULL)`);
    return {
      store,
      peers: [make(drizzlePg(otherPool), table)],
      probe: {
        async write(tx: PgTx, marker: string) {
          await tx.execute(sql`INSERT INTO ${sql.identifier(probe)} (marker) VALUES (${marker})`);
        },
        async count(marker: string) {
          const { rows } = await pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${probe} WHERE marker = $1`,
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
}

describeIdempotencyStoreContract<PgTx>('drizzle (node-postgres)', {
  transactional: true,
  create: () => postgresFixture((db, table) => new DrizzleIdempotencyStore({ db, table })),
});

describeIdempotencyStoreContract<BetterSQLite3Database>('drizzle (better-sqlite3)', {
  transactional: true,
  async create() {
    const directory = mkdtempSync(join(tmpdir(), 'idem-drizzle-sqlite-'));
    const file = join(directory, 'store.db');
    const connections: Database.Database[] = [];
    const cleanup = async () => {
      for (const connection of connections) connection.close();
      rmSync(directory, { recursive: true, force: true });
    };
    try {
      const open = () => {
        const database = new Database(file, { timeout: 10_000 });
        database.pragma('journal_mode = WAL');
        connections.push(database);
        return database;
      };
      const [main, ...others] = [open(), open(), open()];
      main.exec('CREATE TABLE handler_probe (marker TEXT NOT NULL)');
      const store = new DrizzleIdempotencyStore({ db: drizzleSqlite(main) });
      await store.migrate();
      return {
        store,
        peers: others.map((database) => new DrizzleIdempotencyStore({ db: drizzleSqlite(database) })),
        probe: {
          async write(db: BetterSQLite3Database, marker: string) {
            db.run(sql`INSERT INTO handler_probe (marker) VALUES (${marker})`);
          },
          async count(marker: string) {
            const row = others[0].prepare('SELECT count(*) AS n FROM handler_probe WHERE marker = ?').get(marker) as {
              n: number;
            };
            return row.n;
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

describeIdempotencyStoreContract<PgTx>('@nestjs-cls/transactional, Drizzle adapter (node-postgres)', {
  transactional: true,
  create: () =>
    postgresFixture((db, table) => {
      const adapter = new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: 'DRIZZLE' });
      const txHost = new FakeTransactionHost<NodePgDatabase>(
        adapter.optionsFactory(db) as unknown as ConstructorParameters<typeof FakeTransactionHost<NodePgDatabase>>[0],
      );
      return new TransactionHostIdempotencyStore({ txHost, table });
    }),
});
