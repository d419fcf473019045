import { UnrecoverableUniqueJobsError } from './unrecoverable-unique-jobs.error.js';

/**
 * The handler of an `@IdempotencyKey` job returned a value that cannot be stored as JSON (BigInt, a function, a
 * circular structure, NaN…). The claim is released (nothing was recorded as done) and the job fails without retries.
 */
export class UnserializableIdempotencyResultError extends UnrecoverableUniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
    /** Why, with the JSON path of the offending value. */
    readonly reason: string,
  ) {
    super(`The result for idempotency key "${key}" (scope "${scope}") cannot be stored as JSON: ${reason}`);
  }
}
