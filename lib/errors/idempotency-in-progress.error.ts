import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Another job holds the idempotency key and is still running it, and `onInProgress` is `'fail'`: the attempt fails and
 * BullMQ's retry takes over. (With the default `'delay'` the job is moved back to delayed instead.)
 */
export class IdempotencyInProgressError extends UniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
    /** The job holding the key, when known. */
    readonly holderJobId: string | undefined,
    /** How long the holder's lease still runs (ms). */
    readonly retryInMs: number,
  ) {
    super(
      `Idempotency key "${key}" (scope "${scope}") is in progress in job ${holderJobId ?? '(unknown)'}; its lease ends in ${retryInMs} ms`,
    );
  }
}
