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
  type SqlTableName,
} from './sql-records.js';

/**
 * What the store needs of a `pg` pool or client to run one statement: `pg.Pool`, `pg.PoolClient` and `pg.Client` all
 * fit. Declared here so that `pg` stays an optional peer dependency.
 */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

/** A connection checked out of a pool (`pg.PoolClient`): `release(true)` or `release(error)` destroys it. */
export interface PgClientLike extends PgQueryable {
  release(destroy?: boolean | Error): void;
}

/** A connection pool (`pg.Pool`). */
export interface PgPoolLike extends PgQueryable {
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
}

const STORE = 'PostgresIdempotencyStore';

/** The columns of a record as {@link toIdempotencyRecord} reads them, times in ms since the epoch. */
const RECORD_COLUMNS = `scope, key, state, owner, job_id, fingerprint, result, error, attempts,
  floor(extract(epoch from created_at) * 1000)::float8 AS created_at_ms,
  floor(extract(epoch from expires_at) * 1000)::float8 AS expires_at_ms`;

/** {@link ABANDONED_CLAIM_MS} as an interval. */
const ABANDONED_INTERVAL = `interval '${ABANDONED_CLAIM_MS} milliseconds'`;

/** `$n` milliseconds as an interval. */
function ms(parameter: number): string {
  return `($${parameter}::float8 * interval '1 millisecond')`;
}

/**
 * Idempotency records in a PostgreSQL table, through a `pg` pool. Every time (lease ends, retention ends, creation) is
 * the database's clock, so the clocks of the processes sharing the table never matter.
 *
 * Create the table with {@link PostgresIdempotencyStore.migrate} at startup, or put
 * {@link PostgresIdempotencyStore.migrationSql} into your own migrations. Records that are no longer live stay in the
 * table until a claim of the same key overwrites them; prune them from time to time with
 * `DELETE FROM unique_jobs_idempotency WHERE expires_at < now() - interval '1 day'` (the migration indexes
 * `expires_at` for that).
 *
 * In transactional mode ({@link PostgresIdempotencyStore.runInTransaction}) the handler receives a client checked out
 * of the pool with an open transaction: write through it, and its writes commit together with the completed record.
 *
 * ```ts
 * const store = new PostgresIdempotencyStore({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) });
 * await store.migrate();
 * ```
 */
export class PostgresIdempotencyStore implements IdempotencyStore<PgClientLike> {
  /** @inheritDoc */
  readonly name = 'postgres';

  private readonly pool: PgPoolLike;
  private readonly begin: string;
  private readonly tableText: string;
  private readonly table: SqlTableName;
  private readonly sql: {
    claim: string;
    blocking: string;
    live: string;
    renew: string;
    complete: string;
    fail: string;
    release: string;
    lockOwned: string;
    delete: string;
    prune: string;
  };

  constructor(options: PostgresIdempotencyStoreOptions) {
    if (typeof options?.pool?.query !== 'function' || typeof options.pool.connect !== 'function') {
      throw new Error(`${STORE}: options.pool must be a pg.Pool (an object with query() and connect())`);
    }
    this.pool = options.pool;
    const isolations = ['read committed', 'repeatable read', 'serializable'];
    if (options.isolation !== undefined && !isolations.includes(options.isolation)) {
      throw new Error(`${STORE}: options.isolation must be one of ${isolations.join(', ')}`);
    }
    this.begin = options.isolation ? `BEGIN ISOLATION LEVEL ${options.isolation.toUpperCase()}` : 'BEGIN';
    this.tableText = options.table ?? DEFAULT_IDEMPOTENCY_TABLE;
    this.table = parseTableName(this.tableText, STORE);
    const table = this.table.quoted;
    const owned = `scope = $1 AND key = $2 AND owner = $3 AND state = 'in_progress'`;
    this.sql = {
      // One statement: inserts, or overwrites a record that is no longer live. No row back: a live record stopped it.
      // A takeover (replacing an in_progress record) counts one more attempt and keeps created_at, so attempts > 1
      // tells exactly that the claim was a takeover.
      claim: `INSERT INTO ${table} AS cur
          (scope, key, state, owner, job_id, fingerprint, result, error, attempts, created_at, expires_at, updated_at)
        SELECT $1, $2, 'in_progress', $3, $4, $5, NULL, NULL, 1, n.now, n.now + ${ms(6)}, n.now
        FROM (SELECT clock_timestamp() AS now) AS n
        ON CONFLICT (scope, key) DO UPDATE SET
          state = 'in_progress',
          owner = excluded.owner,
          job_id = excluded.job_id,
          fingerprint = excluded.fingerprint,
          result = NULL,
          error = NULL,
          attempts = CASE WHEN cur.state = 'in_progress' THEN cur.attempts + 1 ELSE 1 END,
          created_at = CASE WHEN cur.state = 'in_progress' THEN cur.created_at ELSE excluded.created_at END,
          expires_at = excluded.expires_at,
          updated_at = excluded.updated_at
        WHERE cur.expires_at <= excluded.updated_at
          AND (cur.state <> 'in_progress' OR cur.fingerprint IS NULL OR excluded.fingerprint IS NULL
            OR cur.fingerprint = excluded.fingerprint
            OR cur.expires_at <= excluded.updated_at - ${ABANDONED_INTERVAL})
        RETURNING cur.attempts > 1 AS takeover`,
      // What stopped a claim: the live record, or an ended claim of another payload (not taken over: a mismatch).
      blocking: `SELECT ${RECORD_COLUMNS},
          greatest(0, ceil(extract(epoch from (expires_at - n.now)) * 1000))::float8 AS expires_in_ms
        FROM ${table}, (SELECT clock_timestamp() AS now) AS n
        WHERE scope = $1 AND key = $2 AND (expires_at > n.now
          OR (state = 'in_progress' AND fingerprint <> $3 AND expires_at > n.now - ${ABANDONED_INTERVAL}))`,
      live: `SELECT ${RECORD_COLUMNS},
          greatest(0, ceil(extract(epoch from (expires_at - n.now)) * 1000))::float8 AS expires_in_ms
        FROM ${table}, (SELECT clock_timestamp() AS now) AS n
        WHERE scope = $1 AND key = $2 AND expires_at > n.now`,
      renew: `UPDATE ${table} SET expires_at = clock_timestamp() + ${ms(4)}, updated_at = clock_timestamp()
        WHERE ${owned}`,
      complete: `UPDATE ${table}
        SET state = 'completed', result = $4, error = NULL, expires_at = clock_timestamp() + ${ms(5)},
          updated_at = clock_timestamp()
        WHERE ${owned}`,
      fail: `UPDATE ${table}
        SET state = 'failed', result = NULL, error = $4, expires_at = clock_timestamp() + ${ms(5)},
          updated_at = clock_timestamp()
        WHERE ${owned}`,
      release: `DELETE FROM ${table} WHERE ${owned}`,
      lockOwned: `SELECT 1 FROM ${table} WHERE ${owned} FOR UPDATE`,
      delete: `DELETE FROM ${table} WHERE scope = $1 AND key = $2 RETURNING expires_at > clock_timestamp() AS live`,
      // Rows a transaction holds are skipped, not waited for; the index on expires_at bounds the scan.
      prune: `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table}
        WHERE expires_at <= clock_timestamp()
          AND (state <> 'in_progress' OR expires_at <= clock_timestamp() - ${ABANDONED_INTERVAL})
        LIMIT $1 FOR UPDATE SKIP LOCKED)`,
    };
  }

  /**
   * The DDL of the table (and of the index on `expires_at` used to prune it), for your own migrations. Idempotent
   * (`IF NOT EXISTS`); to run it from several processes at once, prefer {@link PostgresIdempotencyStore.migrate}, which
   * serializes them.
   */
  static migrationSql(table: string = DEFAULT_IDEMPOTENCY_TABLE): string {
    const parsed = parseTableName(table, STORE);
    // An index name cannot be schema-qualified: PostgreSQL puts it in the table's schema.
    const index = quoteIdentifier(`${parsed.name}_expires_at_idx`);
    return `CREATE TABLE IF NOT EXISTS ${parsed.quoted} (
  scope text NOT NULL,
  key text NOT NULL,
  state text NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
  owner text,
  job_id text,
  fingerprint text,
  result text,
  error text,
  attempts integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS ${index} ON ${parsed.quoted} (expires_at);
`;
  }

  /**
   * Creates the table and its index if they do not exist. Safe to call from several processes at once: the DDL runs in
   * a transaction under an advisory lock on the table name.
   */
  async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `nestjs-unique-jobs:migrate:${this.table.quoted}`,
      ]);
      await client.query(PostgresIdempotencyStore.migrationSql(this.tableText));
    });
  }

  /** @inheritDoc */
  async claim(request: IdempotencyClaim): Promise<IdempotencyClaimResult> {
    const { scope, key, owner, leaseMs, fingerprint, jobId } = request;
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const claimed = await this.pool.query(this.sql.claim, [
        scope,
        key,
        owner,
        jobId ?? null,
        fingerprint ?? null,
        leaseMs,
      ]);
      const row = claimed.rows[0];
      if (row) return { claimed: true, takeover: row.takeover === true };
      const blocking = await this.pool.query(this.sql.blocking, [scope, key, fingerprint ?? null]);
      const current = blocking.rows[0];
      if (current) {
        return {
          claimed: false,
          record: toIdempotencyRecord(current as unknown as SqlRecordRow),
          expiresInMs: Number(current.expires_in_ms),
        };
      }
      // The record that stopped the claim expired or was deleted before it could be read: claim again.
    }
    throw claimRaceError(STORE, scope, key);
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, leaseMs: number): Promise<boolean> {
    return changed(await this.pool.query(this.sql.renew, [ref.scope, ref.key, ref.owner, leaseMs]));
  }

  /** @inheritDoc */
  async complete(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): Promise<boolean> {
    return changed(await this.pool.query(this.sql.complete, this.completeValues(ref, completion)));
  }

  /** @inheritDoc */
  async fail(ref: IdempotencyRecordRef, failure: IdempotencyFailure): Promise<boolean> {
    return changed(await this.pool.query(this.sql.fail, [ref.scope, ref.key, ref.owner, failure.error, failure.ttlMs]));
  }

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef): Promise<boolean> {
    return changed(await this.pool.query(this.sql.release, [ref.scope, ref.key, ref.owner]));
  }

  /** @inheritDoc */
  async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
    const { rows } = await this.pool.query(this.sql.live, [scope, key]);
    return rows[0] ? toIdempotencyRecord(rows[0] as unknown as SqlRecordRow) : undefined;
  }

  /** Deletes the key's record whatever its state. `true` if a live one existed (an expired one counts as absent). */
  async delete(scope: string, key: string): Promise<boolean> {
    const { rows } = await this.pool.query(this.sql.delete, [scope, key]);
    return rows.some((row) => row.live === true);
  }

  /** @inheritDoc */
  async prune(limit: number): Promise<number> {
    const result = await this.pool.query(this.sql.prune, [limit]);
    return result.rowCount ?? 0;
  }

  /**
   * Checks a client out of the pool, opens a transaction, locks the owner's record (`SELECT … FOR UPDATE`), runs `work`
   * with that client, then completes the owner's
   * record in the same transaction and commits. If the owner lost its claim (another delivery took it over), the
   * transaction rolls back and {@link IdempotencyLeaseLostError} is thrown; if `work` or `completion` throws, it rolls
   * back and that error is thrown. The client goes back to the pool afterwards (destroyed if the rollback failed, so a
   * broken connection is never reused). Do not commit, roll back or release the client in `work`.
   */
  async runInTransaction<T>(
    ref: IdempotencyRecordRef,
    work: (transaction: PgClientLike) => Promise<T>,
    completion: (value: T) => IdempotencyCompletion,
  ): Promise<T> {
    return this.transaction(async (client) => {
      // Lock the owner's record for the whole transaction: no claimant can take it over until COMMIT or ROLLBACK (a
      // crash drops the connection, which rolls back and unlocks), so the lease needs no renewal meanwhile.
      const held = await client.query(this.sql.lockOwned, [ref.scope, ref.key, ref.owner]);
      if (!changed(held)) throw new IdempotencyLeaseLostError(ref.scope, ref.key);
      const value = await work(client);
      const completed = await client.query(this.sql.complete, this.completeValues(ref, completion(value)));
      if (!changed(completed)) throw new IdempotencyLeaseLostError(ref.scope, ref.key);
      return value;
    });
  }

  /**
   * BEGIN, `body`, COMMIT on a client of the pool; ROLLBACK on any error (the error is rethrown). The client goes back
   * to the pool, or is destroyed when the rollback failed too (BEGIN or the connection itself broke).
   */
  private async transaction<T>(body: (client: PgClientLike) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query(this.begin);
      const value = await body(client);
      await client.query('COMMIT');
      return value;
    } catch (error) {
      broken = await rollback(client);
      throw error;
    } finally {
      if (broken) client.release(broken);
      else client.release();
    }
  }

  private completeValues(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): unknown[] {
    return [ref.scope, ref.key, ref.owner, completion.result ?? null, completion.ttlMs];
  }
}

function changed(result: { rowCount: number | null }): boolean {
  return (result.rowCount ?? 0) > 0;
}

/** Rolls back; answers the rollback's own error (the connection is then broken) or `undefined`. */
async function rollback(client: PgClientLike): Promise<Error | undefined> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
