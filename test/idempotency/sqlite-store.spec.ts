// The SQLite idempotency store against the shared contract: a temporary database file in WAL mode (removed afterwards),
// claims raced over several connections to it, and a handler table of the test's own to watch transactional writes
// commit or roll back (counted through another connection, so only committed rows are seen).
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  SqliteIdempotencyStore,
  type SqliteDatabaseLike,
} from '../../lib/idempotency/stores/sqlite-idempotency.store.js';
import { describeIdempotencyStoreContract } from '../../lib/ops/store-contract/index.js';

describeIdempotencyStoreContract<SqliteDatabaseLike>('sqlite', {
  transactional: true,
  async create() {
    const directory = mkdtempSync(join(tmpdir(), 'idem-contract-sqlite-'));
    const file = join(directory, 'store.db');
    const connections: Database.Database[] = [];
    const cleanup = async () => {
      for (const connection of connections) connection.close();
      rmSync(directory, { recursive: true, force: true });
    };
    try {
      const open = () => {
        const database = new Database(file, { timeout: 10_000 });
        connections.push(database);
        database.pragma('journal_mode = WAL');
        return database;
      };
      const table = 'idempotency_contract';
      const [database, ...others] = [open(), open(), open()];
      const mode = database.pragma('journal_mode', { simple: true });
      if (mode !== 'wal') throw new Error(`expected the WAL journal mode, got ${String(mode)}`);
      const store = new SqliteIdempotencyStore({ database, table });
      await store.migrate();
      const peers = others.map((other) => new SqliteIdempotencyStore({ database: other, table }));
      for (const peer of peers) await peer.migrate();
      database.exec('CREATE TABLE handler_probe (marker TEXT NOT NULL)');
      const reader = others[0];
      return {
        store,
        peers,
        probe: {
          async write(transaction: SqliteDatabaseLike, marker: string) {
            transaction.prepare('INSERT INTO handler_probe (marker) VALUES (?)').run(marker);
          },
          async count(marker: string) {
            const row = reader.prepare('SELECT count(*) AS n FROM handler_probe WHERE marker = ?').get(marker) as {
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
