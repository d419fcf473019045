import { createHash } from 'node:crypto';
import { IdempotencyConnectionLostError } from '../../errors/idempotency-connection-lost.error.js';
import { checkOutWatched } from '../sql/connection-watch.js';
import { ROLLED_BACK_AT_COMMIT } from '../sql/ended-transaction.js';
import { trackTransaction, type TransactionTracker } from '../sql/pg-transaction-tracker.js';
import { transactionBoundClient } from '../sql/transaction-bound-client.js';
import { postgresMigrationSql } from '../sql/postgres-migration.js';
import type { SqlIdempotencyAdapter, SqlResult, SqlStatement } from '../sql/sql-adapter.interface.js';
import { SqlIdempotencyStore } from '../sql/sql-idempotency.store.js';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../sql/sql-records.js';
import { asError } from '../../errors/thrown.js';

/**
 * What the store needs of a `pg` pool or client to run one statement: `pg.Pool`, `pg.PoolClient` and `pg.Client` all
 * fit. Declared here so that `pg` stays an optional peer dependency.
 */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<PgQueryResult>;
  /** A named (prepared) statement: `pg` parses and plans it once per connection. */
  query(config: { name: string; text: string; values: unknown[] }): Promise<PgQueryResult>;
}

/** What `pg` answers to a query. */
export interface PgQueryResult {
  /** The rows returned, as objects by column name. */
  rows: Record<string, unknown>[];
  /** Rows the command returned or changed; `null` for a command that has no count. */
  rowCount: number | null;
  /** The command tag (`'COMMIT'`, `'ROLLBACK'`, …). */
  command?: string;
}

/** A connection checked out of a pool (`pg.PoolClient`): `release(true)` or `release(error)` destroys it. */
export interface PgClientLike extends PgQueryable {
  /** Gives the connection back to its pool; with `true` or an error, destroys it instead (a broken connection). */
  release(destroy?: boolean | Error): void;
}

/** A connection pool (`pg.Pool`). */
export interface PgPoolLike extends PgQueryable {
  /** Checks a connection out for a transaction (waits when the pool is exhausted); the store releases it. */
  connect(): Promise<PgClientLike>;
}

/** Options of {@link PostgresIdempotencyStore}. */
export interface PostgresIdempotencyStoreOptions {
  /** The pool the store runs its statements on (a `pg.Pool`). The store never ends it. */
  pool: PgPoolLike;
  /**
   * The table of the records, optionally schema-qualified (`'jobs.idempotency'`). Letters, digits and underscores
   * only. Default `'unique_jobs_idempotency'`.
   */
  table?: string;
  /**
   * Isolation level of the transactions of transactional mode (the handler's writes run in it). Set it here, not in the
   * handler: the store's first statement has already started the transaction. Keep the pool's own default at READ
   * COMMITTED: the store's claims run on it, and at a stricter default a claim that waited for a locked record fails
   * with a serialization error instead of reading the record. Default: the pool's default (READ COMMITTED).
   */
  isolation?: 'read committed' | 'repeatable read' | 'serializable';
  /**
   * Send the store's statements as named prepared statements, parsed and planned once per connection (default: `true`
   * for a `pg.Pool`, `false` for another object, which may take `query(text, values)` only). Transactional mode runs
   * ~1.25× as fast with them at 16 jobs in flight (docs/performance.md). Set `false` behind a connection pooler that
   * does not keep prepared statements across transactions (PgBouncer in transaction mode before 1.21, or without
   * `max_prepared_statements`). A connection that lost them (`DISCARD ALL`) is discarded, its statement sent again.
   */
  preparedStatements?: boolean;
}

const STORE = 'PostgresIdempotencyStore';
const ENDED_BEFORE_COMMIT =
  'the transaction was ended by a statement of the handler still in flight (a COMMIT or ROLLBACK not awaited) before the store could commit it';
const ISOLATIONS = ['read committed', 'repeatable read', 'serializable'];

/**
 * Idempotency records in a PostgreSQL table, through a `pg` pool. Every time (lease ends, retention ends, creation) is
 * the database's clock, so the clocks of the processes sharing the table never matter.
 *
 * Create the table with {@link PostgresIdempotencyStore.migrate} at startup, or put
 * {@link PostgresIdempotencyStore.migrationSql} into your own migrations (the module checks the table at bootstrap).
 * Records that are no longer live stay in the table until a claim of the same key overwrites them or `prune` deletes
 * them (the migration indexes `expires_at` for that).
 *
 * In transactional mode ({@link PostgresIdempotencyStore.runInTransaction}) the handler receives a client checked out
 * of the pool with an open transaction: write through it, and its writes commit together with the completed record.
 * If that client's connection drops meanwhile, the attempt fails with `IdempotencyConnectionLostError` and the client
 * is discarded; the process is never taken down by it. (Idle clients of the pool are the pool's: give it an `'error'`
 * listener, as `pg` asks.)
 *
 * ```ts
 * const store = new PostgresIdempotencyStore({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) });
 * await store.migrate();
 * ```
 */
export class PostgresIdempotencyStore extends SqlIdempotencyStore<PgClientLike> {
  constructor(options: PostgresIdempotencyStoreOptions) {
    if (typeof options?.pool?.query !== 'function' || typeof options.pool.connect !== 'function') {
      throw new Error(`${STORE}: options.pool must be a pg.Pool (an object with query() and connect())`);
    }
    if (options.isolation !== undefined && !ISOLATIONS.includes(options.isolation)) {
      throw new Error(`${STORE}: options.isolation must be one of ${ISOLATIONS.join(', ')}`);
    }
    if (options.preparedStatements !== undefined && typeof options.preparedStatements !== 'boolean') {
      throw new Error(`${STORE}: options.preparedStatements must be true or false`);
    }
    const prepared = options.preparedStatements ?? isPgPool(options.pool);
    const adapter = pgPoolAdapter(options.pool, options.isolation, prepared);
    super({ adapter, table: options.table, name: 'postgres' });
  }

  /**
   * The DDL of the table (and of the index on `expires_at` used to prune it), for your own migrations. Idempotent
   * (`IF NOT EXISTS`); to run it from several processes at once, prefer {@link PostgresIdempotencyStore.migrate}, which
   * serializes them. The package ships it for the default table as `sql/unique_jobs_idempotency.postgres.sql`.
   */
  static migrationSql(table: string = DEFAULT_IDEMPOTENCY_TABLE): string {
    return postgresMigrationSql(table, STORE);
  }
}

/**
 * The adapter of {@link PostgresIdempotencyStore}: statements on the pool (autocommit), transactions on a client
 * checked out of it and watched for a dropped connection.
 */
export function pgPoolAdapter(
  pool: PgPoolLike,
  isolation?: PostgresIdempotencyStoreOptions['isolation'],
  prepared = false,
): SqlIdempotencyAdapter<PgClientLike> {
  const begin = isolation ? `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}` : 'BEGIN';
  const names = new Map<string, string>();
  const run = async (queryable: PgQueryable, statement: SqlStatement): Promise<SqlResult> => {
    const values = [...statement.params];
    let name = prepared ? names.get(statement.text) : undefined;
    if (prepared && name === undefined) {
      // Named after the text: one text, one name, on every connection (the store's statements are a fixed set).
      name = `uj_${createHash('sha256').update(statement.text).digest('hex').slice(0, 24)}`;
      names.set(statement.text, name);
    }
    let result: PgQueryResult;
    try {
      result = await (name === undefined
        ? queryable.query(statement.text, values)
        : queryable.query({ name, text: statement.text, values }));
    } catch (error) {
      // Outside a transaction, a prepared statement the pooled connection lost, or whose rows changed type (an
      // `ALTER TABLE` of the record table), is sent again unnamed (the pool discards that connection after the error).
      if (name === undefined || queryable !== pool || !lostPlan(error)) throw error;
      result = await queryable.query(statement.text, values);
    }
    return { rows: result.rows, rowCount: result.rowCount ?? 0 };
  };
  return {
    dialect: 'postgres',
    confirmsCommit: true,
    execute: (statement) => run(pool, statement),
    async transaction(body) {
      const { client, watch } = await checkOutWatched(pool);
      let tracker: TransactionTracker | undefined;
      let broken: Error | undefined;
      // The handler's client refuses statements once its body settled: kept past the handler's end, they would run
      // outside the transaction, on a connection back in the pool.
      let over = false;
      try {
        await client.query(begin);
        const tracking = (tracker = trackTransaction(client));
        const handle = transactionBoundClient(client, () => over);
        const value = await body({
          handle,
          execute: (statement) => run(client, statement),
          intact: () => tracking.intact(),
        }).finally(() => (over = true));
        const endings = tracking.endings();
        const committed = await client.query('COMMIT');
        // PostgreSQL answers COMMIT of a transaction a failed statement aborted with ROLLBACK, and no error.
        if (committed.command === 'ROLLBACK') throw new Error(ROLLED_BACK_AT_COMMIT);
        // A COMMIT or ROLLBACK of the handler's still in flight when the store read the tracker (not awaited) ended
        // the transaction before this COMMIT, which then committed nothing of it (or another transaction).
        if (endings !== undefined && tracking.endings() !== endings + 1) throw new Error(ENDED_BEFORE_COMMIT);
        return value;
      } catch (error) {
        broken = await rollback(client);
        // A prepared statement the connection lost (`DISCARD ALL`, `DEALLOCATE`) stays in pg's cache of the client, and
        // one whose rows changed type fails on it until it ends: the connection is discarded rather than fail every
        // transaction it serves.
        if (lostPlan(error)) broken ??= asError(error);
        const lost = watch.lost();
        if (lost) throw new IdempotencyConnectionLostError(lost);
        throw error;
      } finally {
        tracker?.stop();
        watch.stop();
        const destroy = watch.lost() ?? broken;
        if (destroy) client.release(destroy);
        else client.release();
      }
    },
  };
}

/** Rolls back; answers the rollback's own error (the connection is then broken) or `undefined`. */
async function rollback(client: PgQueryable): Promise<Error | undefined> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (error) {
    return asError(error);
  }
}

/** The SQLSTATE of a `pg` error. */
function pgCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * A prepared statement the connection cannot run any more: lost (`26000`: `DISCARD ALL`, `DEALLOCATE`), or planned for
 * rows of another type (`0A000`, "cached plan must not change result type": the record table altered meanwhile).
 */
function lostPlan(error: unknown): boolean {
  const code = pgCode(error);
  return code === '26000' || code === '0A000';
}

/** A `pg.Pool` (which takes named statements), not a wrapper of one that may take `query(text, values)` only. */
function isPgPool(pool: PgPoolLike): boolean {
  const { totalCount, options } = pool as { totalCount?: unknown; options?: unknown };
  return typeof totalCount === 'number' && typeof options === 'object' && options !== null;
}
