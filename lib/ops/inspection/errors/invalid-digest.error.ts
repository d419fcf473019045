import { UniqueJobsError } from '../../../errors/unique-jobs.error.js';

/**
 * A digest (or digest prefix or pattern) given by a user is not one: digests are `v1:` followed by 64 lowercase hex
 * characters. Thrown before anything reaches a Redis key.
 */
export class InvalidDigestError extends UniqueJobsError {
  constructor(
    /** What was wrong, in words. */
    readonly problem: string,
  ) {
    super(problem);
  }
}
