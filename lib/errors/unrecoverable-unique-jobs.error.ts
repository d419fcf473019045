import { UnrecoverableError } from 'bullmq';
import { UNIQUE_JOBS_ERROR } from './unique-jobs.error.js';

/**
 * Base of the library's errors that fail a job for good: BullMQ does not retry an `UnrecoverableError`. Instances are
 * also `instanceof UniqueJobsError`.
 */
export class UnrecoverableUniqueJobsError extends UnrecoverableError {
  readonly [UNIQUE_JOBS_ERROR] = true;

  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
