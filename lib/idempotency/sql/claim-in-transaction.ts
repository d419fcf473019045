import { IdempotencyConnectionLostError } from '../../errors/idempotency-connection-lost.error.js';
import { IdempotencyTransactionEndedError } from '../../errors/idempotency-transaction-ended.error.js';
import type {
  IdempotencyClaim,
  IdempotencyClaimLost,
  IdempotencyCompletion,
  IdempotencyRecord,
  IdempotencyTransactionalClaim,
  IdempotencyTransactionResult,
  TransactionClaim,
} from '../idempotency-store.interface.js';
import { CLAIM_ATTEMPTS, claimRaceError, toIdempotencyRecord, type SqlRecordRow } from './sql-records.js';
import {
  completionRefused,
  handlerFailure,
  namedConnectionLoss,
  RECORD_NOT_FOUND,
  ROLLED_BACK_AT_COMMIT,
  stateElsewhere,
} from './ended-transaction.js';
import type { SqlIdempotencyAdapter, SqlResult, SqlStatement } from './sql-adapter.interface.js';
import type { SqlDialect } from './sql-dialect.js';

/** The statements of the claim inside a transaction (PostgreSQL). */
export type InTransactionDialect = SqlDialect &
  Required<Pick<SqlDialect, 'claimInTransaction' | 'claimFreshInTransaction' | 'finishClaimed'>>;

/** Whether the dialect claims inside the handler's transaction. */
export function claimsInTransaction(sql: SqlDialect): sql is InTransactionDialect {
  return (
    sql.claimInTransaction !== undefined && sql.claimFreshInTransaction !== undefined && sql.finishClaimed !== undefined
  );
}

/**
 * The claims inside a transaction that won and then rolled back (the work threw, the connection dropped): nothing of
 * them is in the table, so `release` has nothing left to do and `fail` writes the record rather than updating it. Kept
 * until the runner settles them; bounded, the oldest forgotten first.
 */
export class RolledBackClaims {
  private readonly claims = new Map<string, { request: IdempotencyClaim; ownCommitted: boolean }>();

  /** `ownCommitted`: the work committed the transaction itself, so the claim's record may be committed. */
  add(request: IdempotencyClaim, ownCommitted: boolean): void {
    this.claims.set(request.owner, { request, ownCommitted });
    if (this.claims.size > MAX_ROLLED_BACK) this.claims.delete(this.claims.keys().next().value!);
  }

  /** The rolled-back claim of `owner`, forgotten once taken. */
  take(owner: string): { request: IdempotencyClaim; ownCommitted: boolean } | undefined {
    const claim = this.claims.get(owner);
    this.claims.delete(owner);
    return claim;
  }
}

/** More rolled-back claims than any runner leaves unsettled at once. */
const MAX_ROLLED_BACK = 10_000;

/**
 * The claim inside the handler's transaction, on PostgreSQL: `BEGIN`, the claim (which writes the record `completed`),
 * the work, the completion's result (only when there is one, or when the work took more than half of the retention)
 * together with the check that the transaction is still the claim's, `COMMIT`. Four statements and the work's, where a
 * claim followed by a transaction takes six. A claim that loses reads what stopped it in the same transaction.
 */
export async function claimInTransaction<T, Transaction>(
  adapter: SqlIdempotencyAdapter<Transaction>,
  sql: InTransactionDialect,
  rolledBack: RolledBackClaims,
  request: IdempotencyTransactionalClaim,
  work: (transaction: Transaction, claim: TransactionClaim) => Promise<T>,
  completion: (value: T) => IdempotencyCompletion,
): Promise<IdempotencyTransactionResult<T>> {
  const elsewhere = (statement: SqlStatement): Promise<SqlResult> => adapter.execute(statement);
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    let claimed = false;
    let txId = '';
    let finished: { value: T } | undefined; // the work's value, once the store's last statement in the transaction ran
    let answer: IdempotencyTransactionResult<T> | undefined;
    try {
      answer = await adapter.transaction(async (tx) => {
        const row =
          (await tx.execute(sql.claimFreshInTransaction(request, request.ttlMs))).rows[0] ??
          (await tx.execute(sql.claimInTransaction(request, request.ttlMs))).rows[0];
        if (row?.tx === null || row?.tx === undefined) {
          // Lost: what stopped it, read in this transaction (its advisory lock, when taken, ends with it).
          const current = (await tx.execute(sql.blocking(request))).rows[0];
          if (current && resumableBy(current, request)) return undefined; // handed over to this job meanwhile: again
          if (current) return lostTo(current);
          return row?.got === false ? heldUncommitted(elsewhere, sql, request) : undefined;
        }
        claimed = true;
        const claimedAt = performance.now(); // monotonic: a wall clock stepped back mid-handler must not skip the move
        txId = typeof row.tx === 'string' ? row.tx : JSON.stringify(row.tx);
        let value: T;
        try {
          const resumed = row.resumed === true ? { resumed: true } : {};
          value = await work(tx.handle, { takeover: row.takeover === true, uncommitted: true, ...resumed });
        } catch (error) {
          throw await handlerFailure(sql, tx, request, txId, error, elsewhere);
        }
        const done = completion(value);
        if (tx.active?.() === false) throw await completionRefused(sql, tx, request, txId, false);
        // The record the claim wrote is the completion, unless there is a result to store or the work took long
        // enough to move its retention; and the transaction is surely still the claim's when the adapter saw nothing
        // end it. Otherwise one more statement stores, moves and checks.
        const settled =
          done.result === undefined &&
          !done.handover &&
          tx.intact?.() === true &&
          performance.now() - claimedAt < done.ttlMs / 4;
        if (!settled) {
          let completed: Record<string, unknown> | undefined;
          try {
            completed = (await tx.execute(sql.finishClaimed(request, done, txId))).rows[0];
          } catch (error) {
            // Refused (the transaction aborted, maybe one the work began after committing the claim's): what became
            // of the claim's transaction decides, as for a work that threw.
            throw await handlerFailure(sql, tx, request, txId, error, elsewhere);
          }
          if (completed?.ours !== true) throw await completionRefused(sql, tx, request, txId, tx.active?.());
          if (completed.present === false) throw new Error(RECORD_NOT_FOUND);
        }
        finished = { value };
        return { claimed: true, value };
      });
      if (claimed && adapter.confirmsCommit !== true) await committedForSure(elsewhere, sql, request, txId);
    } catch (error) {
      // The connection lost at COMMIT, or while its answer was on the way: the transaction may have committed.
      if (
        finished &&
        error instanceof IdempotencyConnectionLostError &&
        (await settledState(elsewhere, sql, request, txId)) === 'committed'
      ) {
        return { claimed: true, value: finished.value };
      }
      // Before the claim won, a serialization failure (a stricter isolation than READ COMMITTED met a claim committed
      // after its snapshot) or a prepared statement the connection lost: nothing is held, claim again.
      if (!claimed && attempt < CLAIM_ATTEMPTS - 1 && sql.claimAgain?.(error)) continue;
      if (claimed) {
        const ownCommitted = error instanceof IdempotencyTransactionEndedError && error.outcome !== 'rolled back';
        rolledBack.add(request, ownCommitted);
      }
      throw namedConnectionLoss(error, request);
    }
    if (answer) return answer;
    // The record that stopped the claim expired or was deleted before it could be read: claim again.
  }
  throw claimRaceError('SqlIdempotencyStore', request.scope, request.key);
}

/**
 * Throws when the claim's transaction was rolled back at `COMMIT`, as {@link ROLLED_BACK_AT_COMMIT} says, for an
 * adapter that cannot see `COMMIT`'s answer (an ORM commits and reads none): a statement of the handler's still in
 * flight after the store's last one failed and aborted the transaction, and PostgreSQL answers the `COMMIT` of an
 * aborted transaction with `ROLLBACK`, not an error. Without this the attempt would succeed with nothing of it
 * committed: the job completed, its effect never made. One statement, on another connection. A state it cannot read
 * (the database went away after the `COMMIT`) or a transaction still open (an outer transaction the adapter joined)
 * is left as the adapter answered.
 */
async function committedForSure(
  elsewhere: (statement: SqlStatement) => Promise<SqlResult>,
  sql: SqlDialect,
  request: IdempotencyTransactionalClaim,
  txId: string,
): Promise<void> {
  if ((await stateElsewhere(elsewhere, sql, request, txId)) === 'aborted') throw new Error(ROLLED_BACK_AT_COMMIT);
}

/**
 * What became of the claim's transaction after its connection was lost at `COMMIT` (see {@link stateElsewhere}),
 * waiting while it is still `'in progress'` (the `COMMIT` still running on the server: a synchronous replica to wait
 * for, a slow flush, a deferred trigger), for at most {@link SETTLE_WAIT_MS}.
 */
async function settledState(
  elsewhere: (statement: SqlStatement) => Promise<SqlResult>,
  sql: SqlDialect,
  request: IdempotencyTransactionalClaim,
  txId: string,
): Promise<unknown> {
  const deadline = Date.now() + SETTLE_WAIT_MS;
  for (let pause = 20; ; pause = Math.min(pause * 2, 500)) {
    const state = await stateElsewhere(elsewhere, sql, request, txId);
    if (state !== 'in progress' || Date.now() + pause > deadline) return state;
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** How long a connection lost at `COMMIT` waits for the server to finish it before the attempt fails. */
const SETTLE_WAIT_MS = 10_000;

/**
 * Whether the record that stopped a claim, read after it (a statement of its own), is handed over to the claimant's own
 * job (its `resumeOwner`): the handover committed between the claim and the read. The claim is made again, and resumes
 * it; answered as lost, the job's own next delivery waited for a handover made to itself, which nobody wakes.
 */
export function resumableBy(row: Record<string, unknown>, request: { resumeOwner?: string }): boolean {
  return request.resumeOwner !== undefined && row.state === 'in_progress' && row.owner === request.resumeOwner;
}

/** The answer of a claim stopped by `row`, a live record (or an ended claim of another payload). */
export function lostTo(row: Record<string, unknown>): IdempotencyClaimLost {
  return {
    claimed: false,
    record: toIdempotencyRecord(row as unknown as SqlRecordRow),
    expiresInMs: Number(row.expires_in_ms),
  };
}

/**
 * The answer of a claim stopped by a claim inside another transaction, not committed yet: an `in_progress` record that
 * names no holder, live for the claimant's own lease at most, and a probe of the key's advisory lock to tell when the
 * holder's transaction ended.
 */
export function heldUncommitted(
  execute: (statement: SqlStatement) => Promise<SqlResult>,
  sql: SqlDialect,
  request: IdempotencyClaim,
): IdempotencyClaimLost {
  const now = Date.now();
  const record: IdempotencyRecord = {
    scope: request.scope,
    key: request.key,
    state: 'in_progress',
    owner: undefined,
    jobId: undefined,
    fingerprint: undefined,
    result: undefined,
    error: undefined,
    attempts: 1,
    createdAt: now,
    expiresAt: now + request.leaseMs,
  };
  const keyHeld = sql.keyHeld?.(request.scope, request.key);
  const stillHeld = keyHeld ? async () => (await execute(keyHeld)).rows[0]?.held === true : undefined;
  return { claimed: false, record, expiresInMs: request.leaseMs, ...(stillHeld ? { stillHeld } : {}) };
}
