import { IdempotencyLeaseLostError } from '../../errors/idempotency-lease-lost.error.js';
import type {
  IdempotencyClaim,
  IdempotencyClaimResult,
  IdempotencyCompletion,
  IdempotencyFailure,
  IdempotencyRecord,
  IdempotencyRecordRef,
  IdempotencyStore,
} from '../idempotency-store.interface.js';
import {
  ABANDONED_CLAIM_MS,
  CLAIM_ATTEMPTS,
  DEFAULT_IDEMPOTENCY_TABLE,
  claimRaceError,
  parseTableName,
  quoteIdentifier,
  toIdempotencyRecord,
  type SqlRecordRow,
} from './sql-records.js';

/** A prepared statement (`better-sqlite3`'s `Statement`). */
export interface SqliteStatementLike {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/**
 * What the store needs of a `better-sqlite3` `Database` (v12). Declared here so that `better-sqlite3` stays an
 * optional peer dependency.
 */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
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

type StatementName =
  'claim' | 'blocking' | 'live' | 'owned' | 'renew' | 'complete' | 'fail' | 'release' | 'delete' | 'prune';

/**
 * Idempotency records in a SQLite table, through `better-sqlite3`. Times are milliseconds of `Date.now()`: SQLite is
 * embedded, so every process sharing the file reads the same host clock.
 *
 * Create the table with {@link SqliteIdempotencyStore.migrate} at startup, or put
 * {@link SqliteIdempotencyStore.migrationSql} into your own migrations. Records that are no longer live stay in the
 * table until a claim of the same key overwrites them; prune them from time to time with
 * `DELETE FROM unique_jobs_idempotency WHERE expires_at < ?` (the migration indexes `expires_at` for that).
 *
 * **Concurrency.** SQLite has one writer, and a `better-sqlite3` `Database` is one connection: a transaction opened for
 * one job would also contain the statements of every other job of the process. So every operation of this store goes
 * through one in-process queue, and {@link SqliteIdempotencyStore.runInTransaction} holds that queue from
 * `BEGIN IMMEDIATE` to `COMMIT`/`ROLLBACK`: transactional handlers are serialized per database, and the other
 * operations of the store (claims, lease renewals of other jobs) wait until the transaction ends. Keep transactional
 * handlers short. **Give the store a connection of its own**, used only by the store and by handlers through their
 * `transaction`: any other statement run on the same connection while a transaction is open (another handler, an HTTP
 * request) becomes part of that transaction and is rolled back with it. Other processes sharing the file wait on SQLite's busy timeout: open the database in WAL mode with a
 * busy timeout longer than your longest transaction:
 *
 * ```ts
 * const database = new Database('app.db', { timeout: 10_000 });
 * database.pragma('journal_mode = WAL');
 * const store = new SqliteIdempotencyStore({ database });
 * await store.migrate();
 * ```
 */
export class SqliteIdempotencyStore implements IdempotencyStore<SqliteDatabaseLike> {
  /** @inheritDoc */
  readonly name = 'sqlite';

  private readonly database: SqliteDatabaseLike;
  private readonly tableText: string;
  private readonly sql: Record<StatementName, string>;
  private readonly statements = new Map<StatementName, SqliteStatementLike>();
  /** The tail of the in-process queue every operation goes through. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: SqliteIdempotencyStoreOptions) {
    if (typeof options?.database?.prepare !== 'function' || typeof options.database.exec !== 'function') {
      throw new Error(
        `${STORE}: options.database must be a better-sqlite3 Database (an object with prepare() and exec())`,
      );
    }
    this.database = options.database;
    this.tableText = options.table ?? DEFAULT_IDEMPOTENCY_TABLE;
    const table = parseTableName(this.tableText, STORE).quoted;
    const columns = `scope, key, state, owner, job_id, fingerprint, result, error, attempts,
      created_at AS created_at_ms, expires_at AS expires_at_ms`;
    const owned = `scope = @scope AND key = @key AND owner = @owner AND state = 'in_progress'`;
    this.sql = {
      // One statement: inserts, or overwrites a record that is no longer live (SET expressions read the old row). No
      // row back: a live record stopped it. A takeover counts one more attempt and keeps created_at, so attempts > 1
      // tells exactly that the claim replaced an in_progress record.
      claim: `INSERT INTO ${table}
          (scope, key, state, owner, job_id, fingerprint, result, error, attempts, created_at, expires_at, updated_at)
        VALUES (@scope, @key, 'in_progress', @owner, @jobId, @fingerprint, NULL, NULL, 1, @now, @expiresAt, @now)
        ON CONFLICT (scope, key) DO UPDATE SET
          state = 'in_progress',
          owner = excluded.owner,
          job_id = excluded.job_id,
          fingerprint = excluded.fingerprint,
          result = NULL,
          error = NULL,
          attempts = CASE WHEN state = 'in_progress' THEN attempts + 1 ELSE 1 END,
          created_at = CASE WHEN state = 'in_progress' THEN created_at ELSE excluded.created_at END,
          expires_at = excluded.expires_at,
          updated_at = excluded.updated_at
        WHERE expires_at <= excluded.updated_at
          AND (state <> 'in_progress' OR fingerprint IS NULL OR excluded.fingerprint IS NULL
            OR fingerprint = excluded.fingerprint OR expires_at <= excluded.updated_at - ${ABANDONED_CLAIM_MS})
        RETURNING attempts > 1 AS takeover`,
      // What stopped a claim: the live record, or an ended claim of another payload (not taken over: a mismatch).
      blocking: `SELECT ${columns}, max(0, expires_at - @now) AS expires_in_ms FROM ${table}
        WHERE scope = @scope AND key = @key AND (expires_at > @now
          OR (state = 'in_progress' AND fingerprint <> @fingerprint AND expires_at > @now - ${ABANDONED_CLAIM_MS}))`,
      live: `SELECT ${columns}, expires_at - @now AS expires_in_ms FROM ${table}
        WHERE scope = @scope AND key = @key AND expires_at > @now`,
      renew: `UPDATE ${table} SET expires_at = @expiresAt, updated_at = @now WHERE ${owned}`,
      complete: `UPDATE ${table}
        SET state = 'completed', result = @result, error = NULL, expires_at = @expiresAt, updated_at = @now
        WHERE ${owned}`,
      fail: `UPDATE ${table}
        SET state = 'failed', result = NULL, error = @error, expires_at = @expiresAt, updated_at = @now
        WHERE ${owned}`,
      release: `DELETE FROM ${table} WHERE ${owned}`,
      owned: `SELECT 1 AS held FROM ${table} WHERE ${owned}`,
      delete: `DELETE FROM ${table} WHERE scope = @scope AND key = @key RETURNING expires_at > @now AS live`,
      prune: `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table}
        WHERE expires_at <= @now AND (state <> 'in_progress' OR expires_at <= @now - ${ABANDONED_CLAIM_MS}) LIMIT @limit)`,
    };
  }

  /** The DDL of the table (and of the index on `expires_at` used to prune it), for your own migrations. Idempotent. */
  static migrationSql(table: string = DEFAULT_IDEMPOTENCY_TABLE): string {
    const parsed = parseTableName(table, STORE);
    // SQLite qualifies the index name with the schema, and the table must be in that same schema.
    const indexName = quoteIdentifier(`${parsed.name}_expires_at_idx`);
    const index = parsed.schema === undefined ? indexName : `${quoteIdentifier(parsed.schema)}.${indexName}`;
    return `CREATE TABLE IF NOT EXISTS ${parsed.quoted} (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
  owner TEXT,
  job_id TEXT,
  fingerprint TEXT,
  result TEXT,
  error TEXT,
  attempts INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS ${index} ON ${quoteIdentifier(parsed.name)} (expires_at);
`;
  }

  /**
   * Creates the table and its index if they do not exist. Safe to call repeatedly and from several processes (each
   * statement is `IF NOT EXISTS` and SQLite serializes writers).
   */
  async migrate(): Promise<void> {
    await this.exclusive(() => {
      this.database.exec(SqliteIdempotencyStore.migrationSql(this.tableText));
    });
  }

  /** @inheritDoc */
  async claim(request: IdempotencyClaim): Promise<IdempotencyClaimResult> {
    const { scope, key, owner, leaseMs, fingerprint, jobId } = request;
    return this.exclusive(() => {
      for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
        const now = Date.now();
        const claimed = this.statement('claim').get({
          scope,
          key,
          owner,
          jobId: jobId ?? null,
          fingerprint: fingerprint ?? null,
          now,
          expiresAt: now + leaseMs,
        }) as { takeover: unknown } | undefined;
        if (claimed) return { claimed: true, takeover: Number(claimed.takeover) === 1 };
        const current = this.statement('blocking').get({
          scope,
          key,
          fingerprint: fingerprint ?? null,
          now: Date.now(),
        }) as (SqlRecordRow & { expires_in_ms: unknown }) | undefined;
        if (current) {
          return { claimed: false, record: toIdempotencyRecord(current), expiresInMs: Number(current.expires_in_ms) };
        }
        // The record that stopped the claim expired (or another process deleted it) before it was read: claim again.
      }
      throw claimRaceError(STORE, scope, key);
    });
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, leaseMs: number): Promise<boolean> {
    return this.exclusive(() => {
      const now = Date.now();
      return changed(this.statement('renew').run({ ...owned(ref), now, expiresAt: now + leaseMs }));
    });
  }

  /** @inheritDoc */
  async complete(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): Promise<boolean> {
    return this.exclusive(() => this.completeNow(ref, completion));
  }

  /** @inheritDoc */
  async fail(ref: IdempotencyRecordRef, failure: IdempotencyFailure): Promise<boolean> {
    return this.exclusive(() => {
      const now = Date.now();
      return changed(
        this.statement('fail').run({ ...owned(ref), error: failure.error, now, expiresAt: now + failure.ttlMs }),
      );
    });
  }

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef): Promise<boolean> {
    return this.exclusive(() => changed(this.statement('release').run(owned(ref))));
  }

  /** @inheritDoc */
  async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
    return this.exclusive(() => {
      const row = this.statement('live').get({ scope, key, now: Date.now() }) as SqlRecordRow | undefined;
      return row ? toIdempotencyRecord(row) : undefined;
    });
  }

  /** Deletes the key's record whatever its state. `true` if a live one existed (an expired one counts as absent). */
  async delete(scope: string, key: string): Promise<boolean> {
    return this.exclusive(() => {
      const rows = this.statement('delete').all({ scope, key, now: Date.now() }) as { live: unknown }[];
      return rows.some((row) => Number(row.live) === 1);
    });
  }

  /** @inheritDoc */
  async prune(limit: number): Promise<number> {
    return this.exclusive(() => Number(this.statement('prune').run({ now: Date.now(), limit }).changes));
  }

  /**
   * Opens a transaction (`BEGIN IMMEDIATE`), runs `work` with the database itself as the transaction handle, then
   * completes the owner's record in the same transaction and commits. If the owner lost its claim, the transaction rolls
   * back and {@link IdempotencyLeaseLostError} is thrown; if `work` or `completion` throws, it rolls back and that error
   * is thrown.
   *
   * The store's in-process queue is held from `BEGIN IMMEDIATE` to `COMMIT`/`ROLLBACK`, so the transactions of
   * concurrent jobs never interleave and no other operation of the store runs inside them: transactional handlers are
   * serialized per database. Do not call this store from `work` (it would wait for itself), and do not commit or roll
   * back in `work` (use `database.transaction()` for nested work: it becomes a savepoint).
   */
  async runInTransaction<T>(
    ref: IdempotencyRecordRef,
    work: (transaction: SqliteDatabaseLike) => Promise<T>,
    completion: (value: T) => IdempotencyCompletion,
  ): Promise<T> {
    return this.exclusive(async () => {
      this.database.exec('BEGIN IMMEDIATE');
      try {
        // The write lock is ours until COMMIT: no claimant anywhere can take the record over meanwhile.
        if (this.statement('owned').get(owned(ref)) === undefined) {
          throw new IdempotencyLeaseLostError(ref.scope, ref.key);
        }
        const value = await work(this.database);
        if (!this.completeNow(ref, completion(value))) throw new IdempotencyLeaseLostError(ref.scope, ref.key);
        this.database.exec('COMMIT');
        return value;
      } catch (error) {
        try {
          this.database.exec('ROLLBACK');
        } catch {
          // No transaction left to roll back (SQLite already rolled it back on some errors).
        }
        throw error;
      }
    });
  }

  private completeNow(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): boolean {
    const now = Date.now();
    return changed(
      this.statement('complete').run({
        ...owned(ref),
        result: completion.result ?? null,
        now,
        expiresAt: now + completion.ttlMs,
      }),
    );
  }

  /** Each statement is prepared once, on first use (after `migrate()` created the table). */
  private statement(name: StatementName): SqliteStatementLike {
    let statement = this.statements.get(name);
    if (!statement) {
      statement = this.database.prepare(this.sql[name]);
      this.statements.set(name, statement);
    }
    return statement;
  }

  /** Runs `operation` when every operation queued before it has finished; a failure does not block the queue. */
  private exclusive<T>(operation: () => T | Promise<T>): Promise<T> {
    const result = this.queue.then(operation);
    this.queue = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

function owned(ref: IdempotencyRecordRef): { scope: string; key: string; owner: string } {
  return { scope: ref.scope, key: ref.key, owner: ref.owner };
}

function changed(result: { changes: number | bigint }): boolean {
  return Number(result.changes) > 0;
}
