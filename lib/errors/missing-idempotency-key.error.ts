import { UnrecoverableUniqueJobsError } from './unrecoverable-unique-jobs.error.js';

/**
 * The key function of `@IdempotencyKey` returned no key (`undefined`, `null`, `''`, or not a string or finite number)
 * and `onMissingKey` is `'error'`. The job fails without retries: its data will not grow a key.
 */
export class MissingIdempotencyKeyError extends UnrecoverableUniqueJobsError {
  constructor(
    /** Queue of the job. */
    readonly queueName: string,
    /** Name of the job. */
    readonly jobName: string,
    /** Id of the job. */
    readonly jobId: string | undefined,
    /** What the key function returned, described. */
    readonly got: string,
  ) {
    super(
      `Job ${jobId ?? '(no id)'} ("${jobName}" on queue "${queueName}") has no idempotency key: the key function returned ${got}; return a non-empty string or a finite number, or set onMissingKey: 'run'`,
    );
  }
}
