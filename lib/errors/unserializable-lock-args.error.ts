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
    /** The job whose lock arguments they are, when known. */
    readonly job?: { readonly queue: string; readonly name: string },
  ) {
    const whose = job ? ` of job "${job.name}" on queue "${job.queue}"` : '';
    super(`Lock arguments${whose} cannot be hashed canonically at ${path}: ${reason}`);
  }

  /** The same error, naming the job whose lock arguments failed. */
  of(job: { queue: string; name: string }): UnserializableLockArgsError {
    return new UnserializableLockArgsError(this.path, this.reason, job);
  }
}
