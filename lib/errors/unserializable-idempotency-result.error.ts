import { cut } from './thrown.js';
import { UnrecoverableUniqueJobsError } from './unrecoverable-unique-jobs.error.js';

/** Longest scope or key the message shows (UTF-16 code units). */
const MAX_KEY = 500;

/**
 * The handler of an `@IdempotencyKey` job returned a value that cannot be stored as JSON (BigInt, a function, a
 * circular structure, NaN…). The job fails without retries. In plain mode its effect has run: the key is kept failed
 * with this error (a later delivery fails with `IdempotencyKeyFailedError`, nothing runs again); in transactional mode
 * the transaction rolls back with the claim.
 */
export class UnserializableIdempotencyResultError extends UnrecoverableUniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
    /** Why, with the JSON path of the offending value (its first 500 UTF-16 code units). */
    readonly reason: string,
    /** JSON path of the offending value in the result, e.g. `$.items[3].amount`, when known (whole). */
    readonly path?: string,
  ) {
    super(
      `The result for idempotency key "${cut(key, MAX_KEY)}" (scope "${cut(scope, MAX_KEY)}") cannot be stored as JSON: ${reason}`,
    );
  }
}
