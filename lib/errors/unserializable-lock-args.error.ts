import { cut } from './thrown.js';
import { UniqueJobsError } from './unique-jobs.error.js';

const MAX_PATH = 500;
const MAX_NAME = 200;

/**
 * Thrown at enqueue (and nothing is enqueued) when the lock arguments are not plain data that can be hashed
 * canonically: a Promise (an `async` lockArgs: it must be synchronous), functions, symbols, BigInt, `undefined`,
 * non-finite numbers, Maps, Sets, Errors, binary data, WeakRefs, class instances with no own data, circular structures.
 */
export class UnserializableLockArgsError extends UniqueJobsError {
  constructor(
    /** JSON path of the offending value, e.g. `$[0].amount` (the message shows its first 500 UTF-16 code units). */
    readonly path: string,
    /** Why it cannot be hashed. */
    readonly reason: string,
    /** The job whose lock arguments they are, when known. */
    readonly job?: {
      /** Name of the job's queue. */
      readonly queue: string;
      /** The job's name. */
      readonly name: string;
    },
  ) {
    const shown = cut(path, MAX_PATH);
    const whose = job
      ? ` of job "${cut(job.name, MAX_NAME)}" on queue "${cut(job.queue, MAX_NAME)}" (what its definition's lockArgs returned, or its data when it has no lockArgs)`
      : '';
    super(`Lock arguments${whose} cannot be hashed canonically at ${shown}: ${reason}`);
  }

  /** The same error, naming the job whose lock arguments failed. */
  of(job: { queue: string; name: string }): UnserializableLockArgsError {
    return new UnserializableLockArgsError(this.path, this.reason, job);
  }
}
