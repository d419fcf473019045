import { UnrecoverableUniqueJobsError } from './unrecoverable-unique-jobs.error.js';

/**
 * The idempotency key was used before with a different payload (its fingerprint differs). The job fails without
 * retries and nothing runs: reusing a key for another payload is a bug in the producer, not a duplicate delivery. A
 * `fingerprint` option changed since the record was stored (other fields, another function) gives the same payload
 * another fingerprint: the message says so, as the other cause to look for.
 */
export class IdempotencyKeyMismatchError extends UnrecoverableUniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
    /** Fingerprint of this job's payload. */
    readonly fingerprint: string,
    /** Fingerprint stored with the key. */
    readonly storedFingerprint: string,
  ) {
    super(
      `Idempotency key "${key}" (scope "${scope}") was already used with a different payload: fingerprint ${fingerprint} does not match the stored ${storedFingerprint} (or the @IdempotencyKey \`fingerprint\` option changed since the record was stored: the same payload then has another fingerprint until the record expires)`,
    );
  }
}
