import type { IdempotencyClaim, IdempotencyClaimLost } from '../idempotency-store.interface.js';
import { heldUncommitted } from './claim-in-transaction.js';
import type { SqlIdempotencyAdapter } from './sql-adapter.interface.js';
import type { SqlDialect } from './sql-dialect.js';

/**
 * When a claim's `error` says it met a lock (or was cancelled while it may have waited on one), and a claim inside
 * another transaction holds the key's advisory lock: the answer for that holder. Otherwise `undefined`.
 */
export async function uncommittedHolder<Transaction>(
  adapter: SqlIdempotencyAdapter<Transaction>,
  sql: SqlDialect,
  request: IdempotencyClaim,
  error: unknown,
): Promise<IdempotencyClaimLost | undefined> {
  if (!sql.keyHeld || !sql.lockBusy?.(error)) return undefined;
  const lost = heldUncommitted((statement) => adapter.execute(statement), sql, request);
  try {
    return (await lost.stillHeld?.()) ? lost : undefined;
  } catch {
    return undefined; // the claim's own error is the one to report
  }
}

/**
 * Whether a claim's `error` says a transaction holds the record. A cancellation (`statement_timeout`) counts only
 * when the row is seen locked: one that was merely slow is the claim's own failure, so a delivery never waits in
 * delayed, again and again, behind a lock nobody holds.
 */
export async function lockedRecord<Transaction>(
  adapter: SqlIdempotencyAdapter<Transaction>,
  sql: SqlDialect,
  scope: string,
  key: string,
  error: unknown,
): Promise<boolean> {
  const busy = sql.lockBusy?.(error);
  if (busy !== 'cancelled' || !sql.rowLocked) return busy === 'locked';
  try {
    const { rows } = await adapter.execute(sql.rowLocked(scope, key));
    return truthy(rows[0]?.locked);
  } catch {
    return false; // the claim's own error is the one to report
  }
}

/** A boolean column: PostgreSQL answers `true`/`false`, SQLite `1`/`0` (or `1n`). */
export function truthy(value: unknown): boolean {
  return value === true || value === 1 || value === 1n || value === '1' || value === 't';
}
