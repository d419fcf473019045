import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Thrown by the `raise` conflict strategy: at enqueue it reaches the caller of `queue.add`; at run time it fails the
 * attempt so BullMQ's retry takes over.
 */
export class DuplicateJobError extends UniqueJobsError {
  constructor(
    /** Queue of the rejected job. */
    readonly queueName: string,
    /** Name of the rejected job. */
    readonly jobName: string,
    /** Digest both jobs share. */
    readonly digest: string,
    /** Id of the job that holds the lock, when known. */
    readonly existingJobId: string | undefined,
  ) {
    super(
      `Duplicate job "${jobName}" on queue "${queueName}": digest ${digest} is locked by job ${existingJobId ?? '(unknown)'}`,
    );
  }
}
