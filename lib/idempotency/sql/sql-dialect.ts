import type {
  IdempotencyClaim,
  IdempotencyCompletion,
  IdempotencyFailure,
  IdempotencyHandover,
  IdempotencyRecordRef,
} from '../idempotency-store.interface.js';
import type { SqlDialectName, SqlResult, SqlStatement } from './sql-adapter.interface.js';

/**
 * The statements of the SQL idempotency store in one dialect, for one table. Every state change is one statement;
 * `claim` inserts or overwrites a record that is no longer live in one statement (no row back: a live record stopped
 * it), and the other changes are compare-and-sets on the owner token.
 */
export interface SqlDialect {
  readonly name: SqlDialectName;
  /** Inserts an `in_progress` record, or takes over one that is no longer live. Rows: `[{ takeover }]` when claimed. */
  claim(request: IdempotencyClaim): SqlStatement;
  /** The record that stopped `claim` (live, or an ended claim of another payload), with `expires_in_ms`. */
  blocking(claim: Pick<IdempotencyClaim, 'scope' | 'key' | 'fingerprint'>): SqlStatement;
  /** The live record of a key, with `expires_in_ms`. */
  live(scope: string, key: string): SqlStatement;
  /** The record of a key whatever its state and expiry, with `expires_in_ms` (a claim that found it locked). */
  current(scope: string, key: string): SqlStatement;
  /**
   * What a claim's error says of the record: `'locked'`, locked by a transaction (PostgreSQL: the claim waits at most
   * {@link CLAIM_LOCK_TIMEOUT_MS} for a row lock, then fails with `lock_not_available`); `'cancelled'`, the claim was
   * cancelled while it ran (an application's `statement_timeout`), which is a lock only if {@link rowLocked} says so;
   * `false`, neither. Absent: claims never time out.
   */
  lockBusy?(error: unknown): 'locked' | 'cancelled' | false;
  /**
   * Rows: `[{ locked }]`, whether a transaction holds the key's record under a row lock (it exists, and a
   * `FOR UPDATE SKIP LOCKED` skips it). Present with {@link lockBusy}.
   */
  rowLocked?(scope: string, key: string): SqlStatement;
  renew(ref: IdempotencyRecordRef, leaseMs: number): SqlStatement;
  /** Gives the owner's `in_progress` record to `handover.owner`, live `handover.leaseMs` from now (a step job's). */
  handOver(ref: IdempotencyRecordRef, handover: IdempotencyHandover): SqlStatement;
  complete(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): SqlStatement;
  fail(ref: IdempotencyRecordRef, failure: IdempotencyFailure): SqlStatement;
  release(ref: IdempotencyRecordRef): SqlStatement;
  /**
   * The first statement of a transaction of transactional mode: finds the owner's `in_progress` record and locks it
   * until the transaction ends (PostgreSQL: `SELECT … FOR UPDATE`; SQLite: an `UPDATE` of it, which takes the
   * database's write lock). Rows: `[{ tx }]` when the owner still holds the record, `tx` naming this transaction
   * (PostgreSQL: its id, `txid_current()`; SQLite: a random marker written into the record, which a rollback undoes).
   */
  lockOwned(ref: IdempotencyRecordRef): SqlStatement;
  /**
   * {@link complete} (or {@link handOver}, given `completion.handover`), only inside the transaction `tx` (what
   * {@link lockOwned} answered) that still holds the lock:
   * changes nothing once that transaction ended (the handler committed or rolled it back itself), even though the
   * statement then runs outside it.
   */
  completeLocked(ref: IdempotencyRecordRef, completion: IdempotencyCompletion, tx: string): SqlStatement;
  /**
   * Rows: `[{ state }]`, what became of the transaction `tx`: `'open'` (the statement runs in it), `'committed'`,
   * `'aborted'`, or another value when the database cannot tell. SQLite answers `'open'` while the record still holds
   * the marker (in the transaction, or committed with it) and `'aborted'` once it does not.
   */
  transactionState(ref: IdempotencyRecordRef, tx: string): SqlStatement;
  /**
   * SQLite: a savepoint taken after {@link lockOwned}, around the handler's work. SQLite has no transaction id, so a
   * handler that ran `COMMIT; BEGIN` would leave the store in a new transaction that still shows the lock's marker
   * (committed with the handler's writes); the savepoint ended with the transaction it belonged to, so releasing it
   * (or rolling back to it) fails, which tells. PostgreSQL needs none: {@link completeLocked} checks the transaction id.
   */
  workSavepoint?: { open: SqlStatement; release: SqlStatement; rollback: SqlStatement };
  /**
   * PostgreSQL: the claim of {@link SqlIdempotencyStore.claimInTransaction}, the first statement of the handler's
   * transaction. Takes the key's transaction-scoped advisory lock without waiting, then writes the record `completed`
   * (kept `ttlMs`) where {@link claim} would write it `in_progress`: others see it only once the transaction commits.
   * Rows: `[{ got, takeover, tx }]`: `got` false, another transaction holds the key; `takeover` null, a live record
   * stopped the claim; otherwise claimed, `tx` naming this transaction.
   */
  claimInTransaction?(request: IdempotencyClaim, ttlMs: number): SqlStatement;
  /**
   * PostgreSQL: {@link claimInTransaction} for a key with no record, tried first (a plain insert costs the database
   * less). Rows: `[{ tx }]` when it claimed (never a takeover); none when a record or another transaction's advisory
   * lock is in the way, and then {@link claimInTransaction} decides.
   */
  claimFreshInTransaction?(request: IdempotencyClaim, ttlMs: number): SqlStatement;
  /**
   * The last statement of that transaction: stores the completion's result (and moves the retention when the work
   * took more than half of it), or hands the record over (`completion.handover`: in progress again, owned by the job's
   * resume token), only inside the transaction `tx`. Rows: `[{ ours, present }]`, whether it still runs in `tx`, and
   * whether the claim's record is still found under the table's name there.
   */
  finishClaimed?(ref: IdempotencyRecordRef, completion: IdempotencyCompletion, tx: string): SqlStatement;
  /**
   * Writes the `failed` record of an owner whose claim inside a transaction rolled back, unless another claim holds
   * the key (a live record, or its advisory lock). `ownCommitted`: the work committed the transaction itself, so the
   * owner's own committed record is overwritten too. A record handed over to the claim's job (`ref.resumeOwner`), which
   * the rollback put back, is overwritten too: the job's later step failed for good.
   */
  failUnclaimed?(ref: IdempotencyClaim, failure: IdempotencyFailure, ownCommitted: boolean): SqlStatement;
  /**
   * Whether an error of {@link claimInTransaction}'s transaction before the claim won is worth a new transaction
   * (PostgreSQL: a serialization failure, a prepared statement the connection lost).
   */
  claimAgain?(error: unknown): boolean;
  /** Rows: `[{ held }]`, whether a transaction holds the key's advisory lock (a claim inside a transaction). */
  keyHeld?(scope: string, key: string): SqlStatement;
  /** Deletes a key's record whatever its state. Rows: `[{ live }]`. */
  delete(scope: string, key: string): SqlStatement;
  /** Deletes up to `limit` records that no longer matter. */
  prune(limit: number): SqlStatement;
  /**
   * Reads no row but every column the store uses, then inserts none with the claim's `ON CONFLICT (scope, key)`: fail
   * when the table or a column is missing, or when the table has no primary key on `(scope, key)` (every claim would
   * then fail).
   */
  probe(): SqlStatement[];
  /**
   * PostgreSQL: rows `[{ name, type, required }]`, every column of the table, its type as `format_type` spells it and
   * whether an insert must set it (NOT NULL, no default), which
   * {@link wrongColumnTypes} checks (a table of the application's own migration may have the store's columns with types
   * that break it only at run time). Absent: types are not checked (SQLite's are affinities).
   */
  columnTypes?(): SqlStatement;
  /** The DDL, one statement each (`IF NOT EXISTS`). */
  migration(): string[];
  /**
   * Rows: `[{ done }]`, whether the table and its index exist already (PostgreSQL: read from the catalog, taking no lock
   * on the table, where `CREATE INDEX IF NOT EXISTS` would wait for every open transaction that wrote to it, and make
   * every claim queue behind it). Absent: the DDL runs each time.
   */
  migrated?(): SqlStatement;
  /** Run in the migration's transaction before the DDL, to serialize concurrent migrations (PostgreSQL). */
  migrationLock(): SqlStatement | undefined;
}

/**
 * How long a PostgreSQL claim waits for a record locked by a transaction (the holder's, in transactional mode) before
 * it gives up and the delivery waits in delayed instead (woken when the holder settles), rather than holding a worker
 * slot and a pool connection for the whole handler.
 */
export const CLAIM_LOCK_TIMEOUT_MS = 200;

/**
 * A later step of a step job, in an in-progress record's `result` (an in-progress record has no result): a claim that
 * resumed a record handed over to its job writes the job's resume token there (`resumed`); one that took over the
 * ended claim of such a delivery (its worker died mid-step) writes this prefix and the token (`laterStep`). The token
 * names the job (its Redis key and creation time), so another job of the same id is not taken for it.
 */
export const LATER_STEP_PREFIX = 'later step:';

/** Every column of the record table, as the migrations create them (the probe reads them all). */
export const RECORD_TABLE_COLUMNS =
  'scope, key, state, owner, job_id, fingerprint, result, error, attempts, created_at, expires_at, updated_at';

/** A statement that answers rows. */
export function query(text: string, params: readonly unknown[]): SqlStatement {
  return { text, params, returnsRows: true };
}

/** A statement that answers a count of changed rows. */
export function command(text: string, params: readonly unknown[]): SqlStatement {
  return { text, params, returnsRows: false };
}

/** Whether a statement changed (or, returning rows, found) at least one row. */
export function affected(statement: SqlStatement, result: SqlResult): boolean {
  return statement.returnsRows ? result.rows.length > 0 : result.rowCount > 0;
}
