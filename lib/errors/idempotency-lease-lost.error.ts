import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * The job's claim on its idempotency key ended before it could complete it: its lease expired (an event-loop stall or
 * an unreachable store longer than the lease) and another delivery took the key over, or the record is gone (deleted,
 * or lost with the store's data: a Redis restarted empty). In transactional mode the handler's writes were rolled back;
 * the attempt fails, and its retry replays the other delivery's result or claims the key anew.
 */
export class IdempotencyLeaseLostError extends UniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
  ) {
    super(
      `Lost the claim on idempotency key "${key}" (scope "${scope}") before completing it: its lease ended and another delivery took the key over, or its record is gone`,
    );
  }
}
