import { within } from '../../common/within.js';
import { IdempotencyConnectionLostError } from '../../errors/idempotency-connection-lost.error.js';
import { IdempotencyLeaseLostError } from '../../errors/idempotency-lease-lost.error.js';
import {
  IdempotencyTransactionEndedError,
  type EndedTransactionOutcome,
} from '../../errors/idempotency-transaction-ended.error.js';
import type { IdempotencyRecordRef } from '../idempotency-store.interface.js';
import type { SqlResult, SqlStatement, SqlTransactionScope } from './sql-adapter.interface.js';
import type { SqlDialect } from './sql-dialect.js';

/** Why an attempt failed whose transaction PostgreSQL rolled back at `COMMIT` (answering `ROLLBACK`, not an error). */
export const ROLLED_BACK_AT_COMMIT =
  'PostgreSQL rolled the transaction back at COMMIT: a statement in it failed (an error the handler caught, or a statement not awaited), so nothing of it was committed';

/** Why an attempt failed whose completion did not find the record its claim wrote in the same transaction. */
export const RECORD_NOT_FOUND =
  "The completion did not find the record the claim wrote in the handler's transaction: the handler deleted or changed it, or moved the table's unqualified name with a SET search_path (SET LOCAL too: the completion runs inside the transaction; give the store a schema-qualified table); the transaction was rolled back";

/** How long the failure path waits for another connection's answer (one the pool may not have free). */
const ELSEWHERE_TIMEOUT_MS = 1_000;

/**
 * What became of the transaction that locked the record (`txId`), asked on its connection: `'open'` (still it),
 * `'committed'`, `'aborted'` (rolled back), or `undefined` when the question itself failed (PostgreSQL refuses every
 * statement in a transaction a failed statement aborted, which is still the store's) or got no answer.
 */
async function transactionState(
  sql: SqlDialect,
  tx: SqlTransactionScope<unknown>,
  ref: IdempotencyRecordRef,
  txId: string,
): Promise<string | undefined> {
  try {
    const state = (await tx.execute(sql.transactionState(ref, txId))).rows[0]?.state;
    return typeof state === 'string' ? state : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why the completion of a transaction could not apply: the handler ended the transaction itself
 * ({@link IdempotencyTransactionEndedError}, saying whether it committed), or, with the transaction still open, the
 * record is no longer the owner's ({@link IdempotencyLeaseLostError}).
 */
export async function completionRefused(
  sql: SqlDialect,
  tx: SqlTransactionScope<unknown>,
  ref: IdempotencyRecordRef,
  txId: string,
  active: boolean | undefined,
): Promise<Error> {
  const state = await transactionState(sql, tx, ref, txId);
  if (state === 'open' && active !== false) return new IdempotencyLeaseLostError(ref.scope, ref.key);
  return new IdempotencyTransactionEndedError(ref.scope, ref.key, outcomeOf(state));
}

/**
 * The error to throw when the handler threw: its own while the store's transaction is still open (the adapter rolls
 * it back: nothing of the attempt is committed, so the claim can be released and the job retried), or rolled back.
 * When the handler committed the transaction itself before throwing, its writes are committed: retrying would run them
 * again, so it becomes {@link IdempotencyTransactionEndedError} (`'committed'`, the handler's error as `cause`), which
 * keeps the key failed. Costs one statement, on the failure path only.
 */
export async function handlerFailure(
  sql: SqlDialect,
  tx: SqlTransactionScope<unknown>,
  ref: IdempotencyRecordRef,
  txId: string,
  error: unknown,
  /** PostgreSQL: runs a statement on another connection (autocommit), for when the transaction's own cannot answer. */
  elsewhere?: (statement: SqlStatement) => Promise<SqlResult>,
): Promise<unknown> {
  // Asked even when the adapter says the transaction is active: on PostgreSQL a raw COMMIT through an ORM's handle
  // leaves the ORM's own flag set (only SQLite's connection knows for sure).
  let active = tx.active?.();
  // SQLite: the savepoint taken after the lock is gone when the handler ended that transaction (even if it began
  // another one): rolling back to it fails. Rolled back to, it undoes the handler's writes, as the rollback would.
  if (active !== false && sql.workSavepoint) {
    try {
      await tx.execute(sql.workSavepoint.rollback);
    } catch (savepointError) {
      if (noSuchSavepoint(savepointError)) active = false;
    }
  }
  let state = await transactionState(sql, tx, ref, txId);
  // No answer on the transaction's connection: a failed statement aborted the transaction there, which may be the
  // store's, or one the handler began after committing the store's (`COMMIT` then `BEGIN`, batch by batch), or the
  // connection is gone. Another connection tells whether the store's transaction committed.
  if (state === undefined && elsewhere) {
    // Bounded: this connection is still checked out, and a pool with none free must not make the attempt wait.
    if ((await stateElsewhere(elsewhere, sql, ref, txId)) === 'committed') state = 'committed';
  }
  // No answer with the transaction maybe still open (aborted by a failed statement, or the connection gone): the
  // handler's own error, as for any failure that leaves the transaction to the adapter.
  if (state === undefined && active !== false) return error;
  if (state === 'open' && active !== false) return error;
  const outcome = outcomeOf(state);
  return outcome === 'rolled back' ? error : new IdempotencyTransactionEndedError(ref.scope, ref.key, outcome, error);
}

/**
 * SQLite: releases the savepoint taken around the handler's work; `true` when it was gone, i.e. the handler ended the
 * transaction it belonged to (even if it then began another one). Always `false` without such a savepoint.
 */
export async function workSavepointGone(sql: SqlDialect, tx: SqlTransactionScope<unknown>): Promise<boolean> {
  if (!sql.workSavepoint) return false;
  try {
    await tx.execute(sql.workSavepoint.release);
    return false;
  } catch (error) {
    // Any other failure (a statement of the handler's still running on the connection): the database's own error.
    if (noSuchSavepoint(error)) return true;
    throw error;
  }
}

/** SQLite's answer to a savepoint that is not there (its transaction ended), through ORMs that wrap it. */
function noSuchSavepoint(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    if (/no such savepoint/i.test(String((e as { message?: unknown }).message))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * What became of the transaction `txId`, asked on another connection (`'committed'`, `'aborted'`, `'in progress'`), or
 * `undefined` when it cannot be read within a second (the pool may have no connection free, the database may be gone).
 */
export async function stateElsewhere(
  elsewhere: (statement: SqlStatement) => Promise<SqlResult>,
  sql: SqlDialect,
  ref: IdempotencyRecordRef,
  txId: string,
): Promise<unknown> {
  try {
    return (await within(elsewhere(sql.transactionState(ref, txId)), ELSEWHERE_TIMEOUT_MS))?.rows[0]?.state;
  } catch {
    return undefined; // the statement could not even be made
  }
}

/** SQLite's `'open'` with the connection out of its transaction: the marker the lock wrote was committed. */
function outcomeOf(state: string | undefined): EndedTransactionOutcome {
  return state === 'open' || state === 'committed' ? 'committed' : state === 'aborted' ? 'rolled back' : 'unknown';
}

/** An adapter's {@link IdempotencyConnectionLostError} names no key: the same error, naming the attempt's. */
export function namedConnectionLoss(error: unknown, ref: IdempotencyRecordRef): unknown {
  if (error instanceof IdempotencyConnectionLostError && error.key === undefined) {
    return new IdempotencyConnectionLostError(error.cause, ref.scope, ref.key);
  }
  return error;
}
