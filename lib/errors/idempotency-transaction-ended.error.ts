import { describeThrown } from './thrown.js';
import { UnrecoverableUniqueJobsError } from './unrecoverable-unique-jobs.error.js';

/**
 * How the claim's transaction ended before the store could complete the record in it: `'committed'` (the handler's
 * writes up to that point are committed, without the completed record), `'rolled back'` (nothing of it is), or
 * `'unknown'` (the store cannot tell).
 */
export type EndedTransactionOutcome = 'committed' | 'rolled back' | 'unknown';

/**
 * In transactional mode, the handler ended the claim's transaction itself (`COMMIT`, `ROLLBACK`,
 * `queryRunner.commitTransaction()` / `rollbackTransaction()`, …) before returning. The store completes the record only
 * inside the transaction that locked it, so it did not: no `completed` record was written. This is a bug in the
 * handler (throw to roll back; never commit or roll back the transaction it was given), so the job fails for good,
 * without retries.
 *
 * The claim is released when nothing was committed (`outcome` `'rolled back'`); when the handler's writes may have
 * been committed (`'committed'` or `'unknown'`), the key is kept as `failed` instead, so that no later delivery runs the
 * handler again on top of them. A handler that committed the transaction and then threw gets this error too, with its
 * own error as `cause`: retrying it would write again.
 */
export class IdempotencyTransactionEndedError extends UnrecoverableUniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
    /** How the transaction ended. */
    readonly outcome: EndedTransactionOutcome,
    /** The handler's own error, when it threw after ending the transaction. */
    handlerError?: unknown,
  ) {
    const what =
      outcome === 'committed'
        ? 'committed it: its writes up to then are committed, without the completed record'
        : outcome === 'rolled back'
          ? 'rolled it back: nothing of it was committed'
          : 'committed or rolled it back';
    super(
      `The handler of idempotency key "${key}" (scope "${scope}") ended the claim's transaction itself (it ${what}); ` +
        'the record was not completed. In transactional mode never commit or roll back the transaction the handler ' +
        'receives: throw to roll back, return to commit' +
        (handlerError === undefined ? '' : `. The handler then threw: ${describe(handlerError)}`),
      ...(handlerError === undefined ? [] : [{ cause: handlerError }]),
    );
  }
}

function describe(error: unknown): string {
  const { name, message } = describeThrown(error);
  return typeof error === 'object' && error !== null ? `${name}: ${message}` : message;
}
