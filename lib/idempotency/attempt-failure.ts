import { attemptOutcome } from '../common/bullmq-lifecycle.js';
import { IdempotencyTransactionEndedError } from '../errors/idempotency-transaction-ended.error.js';
import { UnserializableIdempotencyResultError } from '../errors/unserializable-idempotency-result.error.js';
import { describeThrown } from '../errors/thrown.js';
import type { Attempt } from './attempt.js';

/** Keeps the attempt's failure as the key's outcome (later deliveries fail with it, nothing runs). */
export async function keepFailure({ definition, ref, report }: Attempt, error: unknown): Promise<void> {
  const failure = { error: JSON.stringify(describeThrown(error)), ttlMs: definition.options.ttl };
  if (await definition.store.fail(ref, failure)) report.emit({ type: 'idempotencyFailureKept' });
}

/**
 * The handler failed (or, in a transaction, storing its result): release the claim, or keep a final failure. Never
 * throws: a store out of reach leaves the claim until its lease ends (the next delivery then takes it over).
 */
export async function afterFailure(attempt: Attempt, error: unknown): Promise<void> {
  const { job, definition, ref } = attempt;
  try {
    // A failure is kept only when BullMQ fails the job for good (asked of BullMQ, before it moves the job); and always
    // when the handler ended its transaction after writes that may be committed (so none runs them again). A result
    // that could not be stored fails a transaction, which rolls back its effect: released.
    const keep =
      (error instanceof IdempotencyTransactionEndedError && error.outcome !== 'rolled back') ||
      (definition.options.onFailure === 'keep' &&
        !(error instanceof UnserializableIdempotencyResultError) &&
        (await attemptOutcome(job, error)) === 'fails');
    if (keep) {
      await keepFailure(attempt, error);
    } else if (await definition.store.release(ref)) {
      attempt.report.emit({ type: 'idempotencyReleased' });
    }
  } catch (storeError) {
    attempt.report.error(storeError);
  }
}

/**
 * The claim failed without an answer (a command timeout, a connection lost after it was sent): the store may have
 * applied it, and it would then hold the key until its lease ends, against this job's own retries too. Releases it,
 * best effort and not awaited (a store still out of reach must not hold the failure up): the owner token is this
 * attempt's own, so nothing else is released, not even a retry's claim.
 */
export function releaseUnanswered(attempt: Attempt): void {
  const { store } = attempt.definition;
  Promise.resolve(attempt.ref)
    .then((ref) => store.release(ref))
    .catch(() => {
      // Out of reach still: the claim, if it was applied, stays until its lease ends.
    });
}
