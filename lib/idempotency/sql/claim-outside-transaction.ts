import type { IdempotencyClaim, IdempotencyClaimResult } from '../idempotency-store.interface.js';
import { lostTo, resumableBy } from './claim-in-transaction.js';
import { lockedRecord, truthy, uncommittedHolder } from './claim-locks.js';
import type { SqlIdempotencyAdapter, SqlResult } from './sql-adapter.interface.js';
import type { SqlDialect } from './sql-dialect.js';
import { CLAIM_ATTEMPTS, claimRaceError, toIdempotencyRecord, type SqlRecordRow } from './sql-records.js';

/**
 * The claim of `IdempotencyStore.claim` (not inside the handler's transaction): its statement on its own, again when a
 * race stopped it, and what holds the key when it lost. `label` names the store in the error of a claim that kept
 * losing races.
 */
export async function claimOutsideTransaction<Transaction>(
  adapter: SqlIdempotencyAdapter<Transaction>,
  sql: SqlDialect,
  request: IdempotencyClaim,
  label: string,
): Promise<IdempotencyClaimResult> {
  const { scope, key } = request;
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    let claimed: SqlResult;
    try {
      claimed = await adapter.execute(sql.claim(request));
    } catch (error) {
      // A claim inside another transaction holds the key (its row not committed, its advisory lock taken): in
      // progress, whatever the committed row says; the holder wakes the waiting delivery when it settles.
      const uncommitted = await uncommittedHolder(adapter, sql, request, error);
      if (uncommitted) return uncommitted;
      if (!(await lockedRecord(adapter, sql, scope, key, error))) throw error;
      // A transaction holds the record (a holder of SQLite's transactional mode, whose lease is not renewed
      // while its lock holds): in progress; the holder wakes the waiting delivery when it settles.
      const held = (await adapter.execute(sql.current(scope, key))).rows[0];
      if (!held || resumableBy(held, request)) continue;
      const record = toIdempotencyRecord(held as unknown as SqlRecordRow);
      const expiresInMs = Number(held.expires_in_ms);
      if (record.state !== 'in_progress' && expiresInMs <= 0) continue;
      // A lease that ended under a live lock (no renewal in transactional mode): look again within a second,
      // in case the holder died and its transaction has not been rolled back yet.
      const again = expiresInMs > 0 ? expiresInMs : Math.min(request.leaseMs, LOCKED_RETRY_MS);
      return { claimed: false, record, expiresInMs: again };
    }
    const row = claimed.rows[0];
    if (row) {
      const takeover = truthy(row.takeover);
      if (truthy(row.resumed)) return { claimed: true, takeover, resumed: true };
      return truthy(row.later_step) ? { claimed: true, takeover, laterStep: true } : { claimed: true, takeover };
    }
    const blocking = await adapter.execute(sql.blocking(request));
    const current = blocking.rows[0];
    if (current && resumableBy(current, request)) continue; // handed over to this job meanwhile: claim again
    if (current) return lostTo(current);
    // The record that stopped the claim expired or was deleted before it could be read: claim again.
  }
  throw claimRaceError(label, scope, key);
}

/** When a claim that met a locked record whose lease ended looks again, at the latest. */
const LOCKED_RETRY_MS = 1_000;
