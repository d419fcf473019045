import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Thrown at enqueue (and nothing is enqueued) when the lock arguments are not plain data that can be hashed
 * canonically: a Promise (an `async` lockArgs: it must be synchronous), functions, symbols, BigInt, `undefined`,
 * non-finite numbers, Maps, Sets, Errors, binary data, WeakRefs, class instances with no own data, circular structures.
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
