import { DelayedError } from 'bullmq';
import { IdempotencyInProgressError } from '../errors/idempotency-in-progress.error.js';
import { IdempotencyKeyFailedError } from '../errors/idempotency-key-failed.error.js';
import { IdempotencyKeyMismatchError } from '../errors/idempotency-key-mismatch.error.js';
import type { Attempt } from './attempt.js';
import type { IdempotencyClaimLost } from './idempotency-store.interface.js';
import type { WaitingDuplicates } from './waiting-duplicates.js';
import { settleStaleHandover } from './stale-handover.js';
import { isHandedOver } from './step-handover.js';

/** Slack added to a holder's remaining lease before a waiting duplicate is tried again (clocks differ slightly). */
const DELAY_MARGIN_MS = 50;

/**
 * The key is held by a live record: replay it (completed, or failed and kept), refuse a different payload, or wait
 * for the holder (back to delayed, woken when it settles) or fail at once (`onInProgress: 'fail'`). A live record of
 * this very job (the store says so: `ownJob`) is never a different payload: the job's handler may
 * have changed its data since it claimed (`job.updateData`, BullMQ's step jobs), and a redelivery of it replays or
 * waits as any duplicate. An ended claim the store would not let this delivery take over (answered with `expiresInMs`
 * 0) is a mismatch: the store found it to be another job's.
 */
export async function answerHeldKey(
  attempt: Attempt,
  claim: IdempotencyClaimLost,
  fingerprint: string | undefined,
  waiting: WaitingDuplicates | undefined,
): Promise<unknown> {
  const { record, expiresInMs } = claim;
  const { scope, key } = attempt.ref;
  const { report } = attempt;
  // Parked for a step job that will not come back for it: settled as its job's end would have, then this delivery is
  // tried again at once (it claims the key, or replays the failure kept).
  const settled =
    record.state === 'in_progress' &&
    (await settleStaleHandover(attempt, record, waiting).catch((error: unknown) => {
      report.error(error);
      return false;
    }));
  const ownJob = expiresInMs > 0 && claim.ownJob === true;
  // A store that cannot tell (no `ownJob` answer: the SQL stores keep a job's id, not its queue) and a claim in progress
  // by a job of this id: perhaps this very job, delivered again after its handler moved it between two steps and
  // before that delivery handed the claim over (a round trip later). It waits, its payload compared when it looks
  // again; a job of another queue sharing the scope and the id meets the mismatch then.
  const maybeOwnJob =
    expiresInMs > 0 &&
    claim.ownJob === undefined &&
    record.state === 'in_progress' &&
    record.jobId !== undefined &&
    record.jobId === attempt.job.id;
  if (
    !settled &&
    fingerprint !== undefined &&
    record.fingerprint !== undefined &&
    fingerprint !== record.fingerprint &&
    !ownJob &&
    !maybeOwnJob
  ) {
    report.emit({ type: 'idempotencyMismatch' });
    throw new IdempotencyKeyMismatchError(scope, key, fingerprint, record.fingerprint);
  }
  if (record.state === 'completed') {
    report.emit({ type: 'idempotencyReplayed', state: 'completed' });
    return record.result === undefined ? undefined : (JSON.parse(record.result) as unknown);
  }
  if (record.state === 'failed') {
    report.emit({ type: 'idempotencyReplayed', state: 'failed' });
    const stored = JSON.parse(record.error ?? '{}') as { name?: string; message?: string };
    throw new IdempotencyKeyFailedError(scope, key, stored.name ?? 'Error', stored.message ?? '');
  }
  const { job, token, definition } = attempt;
  const holderJobId = record.jobId;
  if (definition.options.onInProgress === 'fail' && !settled) {
    report.emit({ type: 'idempotencyInProgress', action: 'failed', holderJobId, retryInMs: expiresInMs });
    throw new IdempotencyInProgressError(scope, key, holderJobId, expiresInMs);
  }
  // Back to delayed until the holder settles the record (it promotes this job then), or at the latest until its lease
  // could have ended (a holder that died); BullMQ does not count this as an attempt. A record parked between two steps
  // of its job has no holder running to wake this delivery, and may stay a long time: it looks again within a lease.
  const bound = settled
    ? 0
    : isHandedOver(record.owner)
      ? Math.min(expiresInMs, definition.options.lease)
      : expiresInMs;
  const retryInMs = bound + DELAY_MARGIN_MS;
  const stillHeld =
    claim.stillHeld ??
    (async () => {
      const now = await definition.store.get(scope, key);
      return now?.state === 'in_progress' && now.owner === record.owner;
    });
  if (waiting && attempt.worker) {
    await waiting.delay(job, token, attempt.recordId, retryInMs, attempt.worker, stillHeld, record.owner);
  } else {
    await job.moveToDelayed(Date.now() + retryInMs, token);
  }
  report.emit({ type: 'idempotencyInProgress', action: 'delayed', holderJobId, retryInMs });
  throw new DelayedError(
    `Idempotency key "${key}" (scope "${scope}") is in progress in job ${holderJobId ?? '(unknown)'}: delayed until it settles (at most ${retryInMs} ms)`,
  );
}
