import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * The job's claim on its idempotency key ended before it could complete it: its lease expired (an event-loop stall or
 * an unreachable store longer than the lease) and another delivery took the key over. In transactional mode the
 * handler's writes were rolled back; the attempt fails and its retry replays the other delivery's result.
 */
export class IdempotencyLeaseLostError extends UniqueJobsError {
  constructor(
    /** Scope of the key. */
    readonly scope: string,
    /** The idempotency key (as stored). */
    readonly key: string,
  ) {
    super(
      `Lost the claim on idempotency key "${key}" (scope "${scope}") before completing it: its lease was taken over`,
    );
  }
}
