import { UnrecoverableUniqueJobsError } from './unrecoverable-unique-jobs.error.js';

/**
 * The idempotency key's first run failed for good and `onFailure` is `'keep'` (Stripe-style): every later delivery of
 * the key fails with this error, naming the stored failure, without running.
 */
export class IdempotencyKeyFailedError extends UnrecoverableUniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
    /** Name of the stored error. */
    readonly storedName: string,
    /** Message of the stored error. */
    readonly storedMessage: string,
  ) {
    super(
      `Idempotency key "${key}" (scope "${scope}") already failed (failures are kept): ${storedName}: ${storedMessage}`,
    );
  }
}
