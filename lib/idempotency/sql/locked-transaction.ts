import { IdempotencyLeaseLostError } from '../../errors/idempotency-lease-lost.error.js';
import type { IdempotencyCompletion, IdempotencyRecordRef } from '../idempotency-store.interface.js';
import { completionRefused, handlerFailure, namedConnectionLoss, workSavepointGone } from './ended-transaction.js';
import type { SqlIdempotencyAdapter, SqlResult, SqlStatement } from './sql-adapter.interface.js';
import { affected, type SqlDialect } from './sql-dialect.js';

/**
 * The transaction that follows a claim (`SqlIdempotencyStore.runInTransaction`): locks the owner's record for the
 * whole transaction (no claimant can take it over until COMMIT or ROLLBACK; a crash drops the connection, which rolls
 * back and unlocks, so the lease needs no renewal meanwhile), runs `work`, completes the record in the same
 * transaction. `elsewhere` runs a statement on another connection (PostgreSQL), for the failure path.
 */
export async function runLocked<T, Transaction>(
  adapter: SqlIdempotencyAdapter<Transaction>,
  sql: SqlDialect,
  ref: IdempotencyRecordRef,
  work: (transaction: Transaction) => Promise<T>,
  completion: (value: T) => IdempotencyCompletion,
  elsewhere: ((statement: SqlStatement) => Promise<SqlResult>) | undefined,
): Promise<T> {
  try {
    return await adapter.transaction(async (tx) => {
      const locked = (await tx.execute(sql.lockOwned(ref))).rows[0];
      if (!locked) throw new IdempotencyLeaseLostError(ref.scope, ref.key);
      const txId = String(locked.tx);
      if (sql.workSavepoint) await tx.execute(sql.workSavepoint.open);
      let value: T;
      try {
        value = await work(tx.handle);
      } catch (error) {
        throw await handlerFailure(sql, tx, ref, txId, error, elsewhere);
      }
      const done = completion(value);
      // Completed only in the transaction that locked the record: a handler that committed or rolled it back itself
      // left the connection outside it, where a completion would record an effect that is not there.
      if (tx.active?.() === false || (await workSavepointGone(sql, tx))) {
        throw await completionRefused(sql, tx, ref, txId, false);
      }
      const complete = sql.completeLocked(ref, done, txId);
      if (!affected(complete, await tx.execute(complete))) {
        throw await completionRefused(sql, tx, ref, txId, tx.active?.());
      }
      return value;
    });
  } catch (error) {
    throw namedConnectionLoss(error, ref);
  }
}
