import { UnrecoverableError } from 'bullmq';
import { UNIQUE_JOBS_ERROR } from './unique-jobs.error.js';

/**
 * Base of the library's errors that fail a job for good: BullMQ does not retry an `UnrecoverableError`. Instances are
 * also `instanceof UniqueJobsError`.
 */
export class UnrecoverableUniqueJobsError extends UnrecoverableError {
  readonly [UNIQUE_JOBS_ERROR] = true;

  /** `options.cause`: the error this one reports (BullMQ's `UnrecoverableError` takes no options: set here). */
  constructor(message: string, options?: ErrorOptions) {
    super(message);
    this.name = new.target.name;
    if (options && 'cause' in options) this.cause = options.cause;
  }
}
