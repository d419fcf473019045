import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { OnApplicationShutdown } from '@nestjs/common';
import Database from 'better-sqlite3';
import { PostgresIdempotencyStore, SqliteIdempotencyStore, type IdempotencyStore } from 'nestjs-unique-jobs';
import pg from 'pg';
import { CHARGE_CONCURRENCY, SETTLE_CONCURRENCY } from '../config.js';
import { schemaSql } from './schema.js';
import { sqlOn, type Sql } from './sql.js';

/** What each database contributes to {@link AppDatabase}. */
interface DatabaseParts {
  sql: Sql;
  openStore: () => Promise<IdempotencyStore>;
  close: () => Promise<void>;
}

/**
 * The sample's database: PostgreSQL when `DATABASE_URL` is set, else a SQLite file. {@link AppDatabase.sql} is the
 * application's own connection (the HTTP side reads through it); {@link AppDatabase.idempotencyStore} is the store
 * `@IdempotencyKey({ store: 'sql', transactional: true })` runs the handlers' transactions in.
 */
export class AppDatabase implements OnApplicationShutdown {
  private store?: Promise<IdempotencyStore>;

  private constructor(
    /** The application's connection (never the store's). */
    readonly sql: Sql,
    private readonly openStore: () => Promise<IdempotencyStore>,
    private readonly close: () => Promise<void>,
  ) {}

  /** Opens the database and creates the sample's tables if they are missing. */
  static async open(options: { databaseUrl?: string; sqliteFile: string }): Promise<AppDatabase> {
    const parts = options.databaseUrl ? await openPostgres(options.databaseUrl) : openSqlite(options.sqliteFile);
    return new AppDatabase(parts.sql, parts.openStore, parts.close);
  }

  /** The idempotency store (created, and its table migrated, on first call). */
  idempotencyStore(): Promise<IdempotencyStore> {
    this.store ??= this.openStore();
    return this.store;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.close();
  }
}

/**
 * One pool for the application and the store. A transactional handler holds one of its connections until it commits,
 * and claims and completions of other jobs need another: the pool is sized one above the worker's concurrency.
 */
async function openPostgres(connectionString: string): Promise<DatabaseParts> {
  const pool = new pg.Pool({ connectionString, max: SETTLE_CONCURRENCY + CHARGE_CONCURRENCY + 1 });
  const client = await pool.connect();
  try {
    // Serialized across processes: the API and the worker may start at the same moment.
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('sample-app schema'))`);
    await client.query(schemaSql('postgres'));
    await client.query('COMMIT');
    client.release();
  } catch (error) {
    client.release(error as Error); // discards the connection, and its open transaction
    await pool.end();
    throw error;
  }
  const openStore = async () => {
    const store = new PostgresIdempotencyStore({ pool });
    await store.migrate();
    return store;
  };
  return { sql: sqlOn(pool), openStore, close: () => pool.end() };
}

/**
 * SQLite: the application's connection and, for the store, a connection of its own. A store transaction stays open
 * across the handler's `await`s, and any other statement on that connection (an HTTP request) would become part of it.
 * WAL mode lets the HTTP side read while a handler writes.
 */
function openSqlite(file: string): DatabaseParts {
  mkdirSync(dirname(file), { recursive: true });
  const connect = () => {
    const database = new Database(file, { timeout: 10_000 });
    database.pragma('journal_mode = WAL');
    return database;
  };
  const database = connect();
  database.exec(schemaSql('sqlite'));
  const connections = [database];
  const openStore = async () => {
    const own = connect();
    connections.push(own);
    const store = new SqliteIdempotencyStore({ database: own });
    await store.migrate();
    return store;
  };
  const close = async () => connections.forEach((connection) => connection.close());
  return { sql: sqlOn(database), openStore, close };
}
