import type { SqlIdempotencyAdapter, SqlResult, SqlStatement } from '../sql/sql-adapter.interface.js';
import { SqlIdempotencyStore } from '../sql/sql-idempotency.store.js';
import { sqliteMigrationSql } from '../sql/sqlite-dialect.js';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../sql/sql-records.js';

/** A prepared statement (`better-sqlite3`'s `Statement`). */
export interface SqliteStatementLike {
  /** Runs a write with these positional parameters; `changes` is the number of rows it inserted, updated or deleted. */
  run(...params: unknown[]): { changes: number | bigint };
  /** Runs a query and returns its first row (an object by column name), or `undefined` when it has none. */
  get(...params: unknown[]): unknown;
  /** Runs a query and returns all its rows (objects by column name). */
  all(...params: unknown[]): unknown[];
}

/**
 * What the store needs of a `better-sqlite3` `Database` (v12). Declared here so that `better-sqlite3` stays an
 * optional peer dependency.
 */
export interface SqliteDatabaseLike {
  /** Compiles one statement (the store caches what it prepares); throws on a syntax error or a missing table. */
  prepare(sql: string): SqliteStatementLike;
  /** Runs SQL text without parameters, possibly several statements (`BEGIN IMMEDIATE`, the migration). */
  exec(sql: string): unknown;
  /** Whether a transaction is open on the connection (better-sqlite3 has it). */
  readonly inTransaction?: boolean;
}

/** Options of {@link SqliteIdempotencyStore}. */
export interface SqliteIdempotencyStoreOptions {
  /**
   * The database (a `better-sqlite3` `Database`): a connection of the store's own (see the class notes). The store
   * never closes it.
   */
  database: SqliteDatabaseLike;
  /**
   * The table of the records, optionally qualified with an attached database's name (`'main.idempotency'`). Letters,
   * digits and underscores only. Default `'unique_jobs_idempotency'`.
   */
  table?: string;
}

const STORE = 'SqliteIdempotencyStore';

/**
 * Idempotency records in a SQLite table, through `better-sqlite3`. Times are milliseconds of `Date.now()`: SQLite is
 * embedded, so every process sharing the file reads the same host clock.
 *
 * Create the table with {@link SqliteIdempotencyStore.migrate} at startup, or put
 * {@link SqliteIdempotencyStore.migrationSql} into your own migrations (the module checks the table at bootstrap).
 * Records that are no longer live stay in the table until a claim of the same key overwrites them or `prune` deletes
 * them (the migration indexes `expires_at` for that).
 *
 * **Concurrency.** SQLite has one writer, and a `better-sqlite3` `Database` is one connection: a transaction opened for
 * one job would also contain the statements of every other job of the process. So every operation of this store goes
 * through one in-process queue, and {@link SqliteIdempotencyStore.runInTransaction} holds that queue from
 * `BEGIN IMMEDIATE` to `COMMIT`/`ROLLBACK`: transactional handlers are serialized per database, and the other
 * operations of the store (claims, lease renewals of other jobs) wait until the transaction ends. Keep transactional
 * handlers short. **Give the store a connection of its own**, used only by the store and by handlers through their
 * `transaction`: any other statement run on the same connection while a transaction is open (another handler, an HTTP
 * request) becomes part of that transaction and is rolled back with it. Other processes sharing the file wait on
 * SQLite's busy timeout: open the database in WAL mode with a busy timeout longer than your longest transaction. A
 * second connection of the *same* process must not write while a transactional handler runs: better-sqlite3 waits on
 * the busy timeout synchronously, which stops the event loop (and so the handler holding the lock) for the whole
 * timeout, then fails with `SQLITE_BUSY`; write from another process or a worker thread:
 *
 * ```ts
 * const database = new Database('app.db', { timeout: 10_000 });
 * database.pragma('journal_mode = WAL');
 * const store = new SqliteIdempotencyStore({ database });
 * await store.migrate();
 * ```
 *
 * In transactional mode the handler receives the database itself, inside `BEGIN IMMEDIATE`. Do not call this store
 * from the handler (it would wait for itself), and do not commit or roll back there (use `database.transaction()` for
 * nested work: it becomes a savepoint).
 */
export class SqliteIdempotencyStore extends SqlIdempotencyStore<SqliteDatabaseLike> {
  constructor(options: SqliteIdempotencyStoreOptions) {
    if (typeof options?.database?.prepare !== 'function' || typeof options.database.exec !== 'function') {
      throw new Error(
        `${STORE}: options.database must be a better-sqlite3 Database (an object with prepare() and exec())`,
      );
    }
    super({ adapter: betterSqliteAdapter(options.database), table: options.table, name: 'sqlite' });
  }

  /**
   * The DDL of the table (and of the index on `expires_at` used to prune it), for your own migrations. Idempotent. The
   * package ships it for the default table as `sql/unique_jobs_idempotency.sqlite.sql`.
   */
  static migrationSql(table: string = DEFAULT_IDEMPOTENCY_TABLE): string {
    return sqliteMigrationSql(table, STORE);
  }
}

/**
 * The adapter of {@link SqliteIdempotencyStore}: statements prepared once each (on first use, so after `migrate()`
 * created the table), transactions opened with `BEGIN IMMEDIATE` on the database itself (the store's in-process queue
 * keeps them from interleaving).
 */
export function betterSqliteAdapter(database: SqliteDatabaseLike): SqlIdempotencyAdapter<SqliteDatabaseLike> {
  const statements = new Map<string, SqliteStatementLike>();
  const execute = async (statement: SqlStatement): Promise<SqlResult> => {
    let prepared = statements.get(statement.text);
    if (!prepared) {
      prepared = database.prepare(statement.text);
      statements.set(statement.text, prepared);
    }
    if (statement.returnsRows) {
      const rows = prepared.all(...statement.params) as Record<string, unknown>[];
      return { rows, rowCount: rows.length };
    }
    return { rows: [], rowCount: Number(prepared.run(...statement.params).changes) };
  };
  return {
    dialect: 'sqlite',
    execute,
    async transaction(body) {
      database.exec('BEGIN IMMEDIATE');
      try {
        const value = await body({ handle: database, execute, active: () => database.inTransaction !== false });
        database.exec('COMMIT');
        return value;
      } catch (error) {
        try {
          database.exec('ROLLBACK');
        } catch {
          // No transaction left to roll back (SQLite already rolled it back on some errors).
        }
        throw error;
      }
    },
  };
}
