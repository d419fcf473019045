import { Lock, type JobEnqueueLock } from './lock.js';

/**
 * Locked from enqueue until `lockTtl` passes, whatever happens to the job: "at most once per period". Nothing releases
 * it; the period ends with its TTL (removing or cleaning the job does not end it).
 */
export class UntilExpiredLock extends Lock {
  readonly type = 'until_expired';
  readonly conflictSides = ['client'] as const;
  override readonly requiresTtl = true;
  override readonly outlivesJob = true;

  /** Back from failed or completed: the job's own period (or a new one, if it ended) admits it. */
  override reentering(enqueueLock: JobEnqueueLock) {
    return enqueueLock.retake();
  }
}
