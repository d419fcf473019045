import type * as DrizzleOrm from 'drizzle-orm';
import { IdempotencyConnectionLostError } from '../../errors/idempotency-connection-lost.error.js';
import { transactionBoundClient } from '../sql/transaction-bound-client.js';
import { openWatched } from '../sql/connection-watch.js';
import type { SqlDialectName, SqlIdempotencyAdapter, SqlResult, SqlStatement } from '../sql/sql-adapter.interface.js';
import { SqlIdempotencyStore } from '../sql/sql-idempotency.store.js';

/** `drizzle-orm`'s module: a type only, the module itself is imported on first use. */
type SqlModule = typeof DrizzleOrm;

/** A Drizzle SQL object (`SQL`, or anything with `getSQL()`): what the store hands to `execute`, `run` and `all`. */
export interface DrizzleSqlLike {
  /** The `SQL` object Drizzle's drivers run (their query builders implement it). */
  getSQL(): unknown;
}

/** Drizzle's transaction options on PostgreSQL (`PgTransactionConfig`). */
export interface DrizzlePgTransactionConfig {
  /** The transaction's isolation level (`SET TRANSACTION ISOLATION LEVEL`). Default: the database's, `read committed`. */
  isolationLevel?: 'read uncommitted' | 'read committed' | 'repeatable read' | 'serializable';
  /** Whether the transaction may write. Default `'read write'`. */
  accessMode?: 'read only' | 'read write';
  /** `DEFERRABLE`: a `serializable`, `read only` transaction that waits for a snapshot free of serialization failures. */
  deferrable?: boolean;
}

/**
 * A Drizzle database on PostgreSQL (`drizzle-orm/node-postgres`, also postgres-js): what the store needs of it.
 * Declared here so that `drizzle-orm` stays an optional peer dependency; a real `NodePgDatabase` fits.
 */
export interface DrizzlePgDatabaseLike<Tx = unknown> {
  /** Runs a Drizzle `SQL` (typed `never` here so that any Drizzle driver's own signature fits). */
  execute(query: never): PromiseLike<{ rows: unknown[]; rowCount?: number | null }>;
  /**
   * Runs `transaction` in a database transaction on one pooled connection: commits when it resolves, rolls back and
   * rejects when it rejects.
   */
  transaction<T>(transaction: (tx: Tx) => Promise<T>, config?: DrizzlePgTransactionConfig): Promise<T>;
}

/** A Drizzle database on SQLite (`drizzle-orm/better-sqlite3`): a real `BetterSQLite3Database` fits. */
export interface DrizzleSqliteDatabaseLike {
  /** Runs a Drizzle `SQL` (typed `never` here so that any Drizzle driver's own signature fits). */
  run(query: never): unknown;
  /** Runs a Drizzle `SQL` query and returns its rows (typed `never` here for the same reason). */
  all(query: never): unknown;
}

/** Options of {@link DrizzleIdempotencyStore}. */
export interface DrizzleIdempotencyStoreOptions<Db> {
  /** The application's Drizzle database: node-postgres (PostgreSQL) or better-sqlite3 (SQLite). */
  db: Db;
  /** Its SQL dialect. Default: `'postgres'` for a database with `execute()`, else `'sqlite'`. */
  dialect?: SqlDialectName;
  /** The table of the records (see `SqlIdempotencyStoreOptions.table`). Default `'unique_jobs_idempotency'`. */
  table?: string;
  /** Options of the transactions of transactional mode on PostgreSQL, e.g. `{ isolationLevel: 'repeatable read' }`. */
  transactionConfig?: DrizzlePgTransactionConfig;
}

/** What the handler receives in transactional mode: the `tx` of `db.transaction()` (PostgreSQL), or `db` (SQLite). */
export type DrizzleTransactionOf<Db> = Db extends DrizzlePgDatabaseLike<infer Tx> ? Tx : Db;

/**
 * Idempotency records through a Drizzle database, PostgreSQL or SQLite: the same table and statements as
 * `PostgresIdempotencyStore` and `SqliteIdempotencyStore`, sent as Drizzle SQL (`drizzle-orm` is imported when the
 * store first runs a statement, never before).
 *
 * In transactional mode, on PostgreSQL, the handler receives the `tx` of `db.transaction()`
 * (`idempotencyOf<typeof tx>(job).transaction`): `tx.insert(payments).values(…)`, `tx.update(…)`, `tx.query.…` join
 * the claim's transaction and commit with the completed record; `db` itself does not. If the transaction's connection
 * drops while the handler runs, the attempt fails with `IdempotencyConnectionLostError` and the process lives on. On
 * SQLite (better-sqlite3, whose `db.transaction()` cannot await), the store opens `BEGIN IMMEDIATE` on the database and
 * the handler receives `db` itself, whose connection is inside the transaction: as with `SqliteIdempotencyStore`,
 * give the store a database connection of its own.
 *
 * ```ts
 * const store = new DrizzleIdempotencyStore({ db: drizzle(pool) });
 * await store.migrate();
 * ```
 */
export class DrizzleIdempotencyStore<
  Db extends DrizzlePgDatabaseLike | DrizzleSqliteDatabaseLike,
> extends SqlIdempotencyStore<DrizzleTransactionOf<Db>> {
  constructor(options: DrizzleIdempotencyStoreOptions<Db>) {
    const db = options?.db as Partial<DrizzlePgDatabaseLike & DrizzleSqliteDatabaseLike> | undefined;
    const dialect = options?.dialect ?? (typeof db?.execute === 'function' ? 'postgres' : 'sqlite');
    const fits =
      dialect === 'postgres'
        ? typeof db?.execute === 'function' && typeof db.transaction === 'function'
        : typeof db?.run === 'function' && typeof db.all === 'function';
    if (!fits) {
      throw new Error(
        `DrizzleIdempotencyStore: options.db must be a Drizzle database (${dialect === 'postgres' ? 'with execute() and transaction()' : 'with run() and all()'})`,
      );
    }
    const adapter =
      dialect === 'postgres'
        ? drizzlePgAdapter(options.db as DrizzlePgDatabaseLike, options.transactionConfig)
        : drizzleSqliteAdapter(options.db as DrizzleSqliteDatabaseLike);
    super({
      adapter: adapter as SqlIdempotencyAdapter<DrizzleTransactionOf<Db>>,
      table: options.table,
      name: 'drizzle',
    });
  }
}

let sqlModule: Promise<SqlModule> | undefined;

/** `drizzle-orm`, imported on first use. */
function drizzle(): Promise<SqlModule> {
  sqlModule ??= import('drizzle-orm');
  return sqlModule;
}

/** A statement as Drizzle SQL: its text split at the placeholders, each value a bound parameter. */
export async function toDrizzleSql(statement: SqlStatement, dialect: SqlDialectName): Promise<DrizzleSqlLike> {
  const { sql } = await drizzle();
  const chunks = statement.text.split(dialect === 'postgres' ? /\$(\d+)/ : /(\?)/);
  const parts = chunks.map((chunk, i) => {
    if (i % 2 === 0) return sql.raw(chunk);
    return sql.param(dialect === 'postgres' ? statement.params[Number(chunk) - 1] : statement.params[(i - 1) / 2]);
  });
  return sql.join(parts);
}

/** Runs one statement on a Drizzle PostgreSQL database or transaction. */
export async function drizzlePgExecute(db: DrizzlePgDatabaseLike, statement: SqlStatement): Promise<SqlResult> {
  const result = await db.execute((await toDrizzleSql(statement, 'postgres')) as never);
  const rows = result.rows as Record<string, unknown>[];
  return { rows, rowCount: statement.returnsRows ? rows.length : Number(result.rowCount ?? 0) };
}

/** Runs one statement on a Drizzle SQLite database. */
export async function drizzleSqliteExecute(db: DrizzleSqliteDatabaseLike, statement: SqlStatement): Promise<SqlResult> {
  const query = await toDrizzleSql(statement, 'sqlite');
  if (statement.returnsRows) {
    const rows = (await db.all(query as never)) as Record<string, unknown>[];
    return { rows, rowCount: rows.length };
  }
  const result = (await db.run(query as never)) as { changes?: number | bigint; rowsAffected?: number };
  return { rows: [], rowCount: Number(result.changes ?? result.rowsAffected ?? 0) };
}

/** The `pg` client of a Drizzle node-postgres transaction (`tx._.session.client`), if it shows one. */
export function drizzleTransactionClient(tx: unknown): unknown {
  return (tx as { _?: { session?: { client?: unknown } } } | undefined)?._?.session?.client;
}

/** What a Drizzle database runs on (`db.$client`: a `pg` pool or client), if it shows it. */
export function drizzleClientOf(db: unknown): unknown {
  return (db as { $client?: unknown } | undefined)?.$client;
}

/**
 * Runs `body` inside `db.transaction()` (`open`), watching its connection from the moment Drizzle checks it out of
 * `source` (the pool under `db`), before its `BEGIN`: Drizzle leaves that `pg` client without an `'error'` listener. A
 * connection that drops meanwhile, during `BEGIN` included, rejects with `IdempotencyConnectionLostError` (Drizzle's
 * own rollback then fails too; the client is discarded by the pool).
 */
export async function drizzlePgTransaction<Tx, R>(
  source: unknown,
  open: (run: (tx: Tx) => Promise<R>) => Promise<R>,
  body: (tx: Tx) => Promise<R>,
): Promise<R> {
  return openWatched(source, async (watch) => {
    try {
      return await open((tx) => {
        watch.adopt(drizzleTransactionClient(tx));
        let over = false;
        guardLateStatements(tx, source, () => over);
        return body(tx).finally(() => (over = true));
      });
    } catch (error) {
      const lost = watch.lost();
      if (lost) {
        watch.releaseStranded();
        throw new IdempotencyConnectionLostError(lost);
      }
      throw error;
    } finally {
      watch.stop();
    }
  });
}

/**
 * Refuses the statements run on a Drizzle node-postgres `tx` once the handler's body settled, as
 * `PostgresIdempotencyStore` refuses them on its client (see `transactionBoundClient`): kept past the handler's end (a
 * timer, a promise chain not awaited), `tx` would run them outside the transaction, on a connection back in the pool.
 * Drizzle's own `commit` and `rollback`, which follow the body, go through once each until Drizzle releases the client
 * (a `rollback` follows a `commit` that failed: refused, its refusal would replace the commit's error). (Only on a
 * transaction's own session, over a client checked out of a pool.)
 */
export function guardLateStatements(tx: unknown, source: unknown, over: () => boolean): void {
  const session = (tx as { _?: { session?: { client?: unknown } } } | undefined)?._?.session;
  const client = session?.client;
  // A database on one `pg.Client` (not a pool) runs its transactions on its own session: left alone, it outlives them.
  if (!session || typeof client !== 'object' || client === null || client === source) return;
  // Drizzle sends `commit`, or `rollback` (the body threw, or its `commit` failed: a deferred constraint, a serialization
  // failure), each at most once, then releases the client: after that nothing of it goes through.
  const sent = new Set<string>();
  let released = false;
  const drizzleEnds = (args: unknown[]): boolean => {
    const text = typeof args[0] === 'object' ? (args[0] as { text?: unknown } | null)?.text : args[0];
    if (released || (text !== 'commit' && text !== 'rollback') || sent.has(text)) return false;
    sent.add(text);
    return true;
  };
  const bound = transactionBoundClient(client, over, drizzleEnds);
  // Drizzle releases the client it checked out itself: its `release` is the client's own (the handler's is refused).
  session.client = new Proxy(bound, {
    get(target, property) {
      if (property !== 'release') return Reflect.get(target, property, target) as unknown;
      const value: unknown = Reflect.get(client, property, client);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        released = true;
        return (value as (...a: unknown[]) => unknown).apply(client, args);
      };
    },
  });
}

function drizzlePgAdapter(
  db: DrizzlePgDatabaseLike,
  config: DrizzlePgTransactionConfig | undefined,
): SqlIdempotencyAdapter<unknown> {
  return {
    dialect: 'postgres',
    execute: (statement) => drizzlePgExecute(db, statement),
    transaction: (body) =>
      drizzlePgTransaction(
        drizzleClientOf(db),
        (run) => db.transaction(run, config),
        (tx) => body({ handle: tx, execute: (statement) => drizzlePgExecute(tx as DrizzlePgDatabaseLike, statement) }),
      ),
  };
}

function drizzleSqliteAdapter(db: DrizzleSqliteDatabaseLike): SqlIdempotencyAdapter<unknown> {
  const exec = async (text: string) => drizzleSqliteExecute(db, { text, params: [], returnsRows: false });
  const execute = (statement: SqlStatement) => drizzleSqliteExecute(db, statement);
  return {
    dialect: 'sqlite',
    execute,
    async transaction(body) {
      await exec('BEGIN IMMEDIATE');
      try {
        const value = await body({ handle: db, execute, active: () => sqliteClientOf(db)?.inTransaction !== false });
        await exec('COMMIT');
        return value;
      } catch (error) {
        await exec('ROLLBACK').catch(() => undefined);
        throw error;
      }
    },
  };
}

/** The better-sqlite3 `Database` under a Drizzle SQLite database (`db.$client`), if it shows one. */
function sqliteClientOf(db: DrizzleSqliteDatabaseLike): { inTransaction?: unknown } | undefined {
  const client = drizzleClientOf(db);
  return typeof client === 'object' && client !== null ? client : undefined;
}
