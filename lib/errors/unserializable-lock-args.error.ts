import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Thrown at enqueue (and nothing is enqueued) when the lock arguments cannot be hashed canonically: functions,
 * symbols, BigInt, `undefined`, non-finite numbers, Maps, Sets, circular structures.
 */
export class UnserializableLockArgsError extends UniqueJobsError {
  constructor(
    /** JSON path of the offending value, e.g. `$[0].amount`. */
    readonly path: string,
    /** Why it cannot be hashed. */
    readonly reason: string,
  ) {
    super(`Lock arguments cannot be hashed canonically at ${path}: ${reason}`);
  }
}
