import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * An idempotency store could not be used when the application started: typically its table does not exist yet. Thrown
 * at bootstrap (before any worker takes a job), naming the store as registered in
 * `forRoot({ idempotency: { store, stores } })` and what creates the table.
 */
export class IdempotencyStoreNotReadyError extends UniqueJobsError {
  constructor(
    /** The store's name as registered (`'default'` for `idempotency.store`). */
    readonly store: string,
    /** What the store's check found, and how to fix it. */
    readonly problem: string,
    /** The error the check met. */
    override readonly cause?: unknown,
  ) {
    super(`Idempotency store "${store}" is not ready: ${problem}`);
  }
}
