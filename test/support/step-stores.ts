// The SQL idempotency stores the step-job suites run on (PostgreSQL, SQLite), each with an effects table a handler
// writes through its transaction (transactional mode) and the suite reads back.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Job } from 'bullmq';
import {
  idempotencyOf,
  PostgresIdempotencyStore,
  SqliteIdempotencyStore,
  type IdempotencyJob,
  type IdempotencyStore,
  type PgClientLike,
  type SqliteDatabaseLike,
} from '../../lib/index.js';
import { pgPool, uniqueTable } from './postgres.js';

/** A step job's data: its idempotency key, and the step it is at (1 when absent). */
export interface Steps {
  key: string;
  step?: number;
}

/** The idempotency key of a step job. */
export const byKey = (job: IdempotencyJob<Steps>) => job.data.key;

/** A SQL store of the step suites, with its effects table. */
export interface StepStore {
  store: IdempotencyStore;
  /** Writes one effect row through the handler's transaction (transactional mode). */
  write(job: Job, what: string): Promise<void>;
  /** The committed effect rows, in order. */
  written(): Promise<string[]>;
  /** Drops what it created and closes its connections. */
  close(): Promise<void>;
}

/** Creates a store of `kind` on its own table (PostgreSQL) or file (SQLite), with an effects table. */
export async function stepStore(kind: 'postgres' | 'sqlite'): Promise<StepStore> {
  if (kind === 'postgres') {
    const table = uniqueTable('idem_steps');
    const effects = uniqueTable('fx_steps');
    const pool = pgPool(3);
    const store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    await pool.query(`CREATE TABLE ${effects} (id serial PRIMARY KEY, what text NOT NULL)`);
    return {
      store,
      write: async (job, what) => {
        const tx = idempotencyOf<PgClientLike>(job).transaction!;
        await tx.query(`INSERT INTO ${effects} (what) VALUES ($1)`, [what]);
      },
      written: async () =>
        (await pool.query<{ what: string }>(`SELECT what FROM ${effects} ORDER BY id`)).rows.map((r) => r.what),
      close: async () => {
        await pool.query(`DROP TABLE IF EXISTS ${table}, ${effects}`);
        await pool.end();
      },
    };
  }
  const directory = mkdtempSync(join(tmpdir(), 'idem-steps-'));
  const database = new Database(join(directory, 'store.db'), { timeout: 10_000 });
  const store = new SqliteIdempotencyStore({ database, table: 'idempotency_steps' });
  await store.migrate();
  database.exec('CREATE TABLE effects (id INTEGER PRIMARY KEY, what TEXT NOT NULL)');
  return {
    store,
    write: async (job, what) => {
      idempotencyOf<SqliteDatabaseLike>(job).transaction!.prepare('INSERT INTO effects (what) VALUES (?)').run(what);
    },
    written: async () =>
      (database.prepare('SELECT what FROM effects ORDER BY id').all() as { what: string }[]).map((r) => r.what),
    close: async () => {
      database.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
