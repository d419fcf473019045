import type { ConflictSide, LockType } from '../interfaces/unique-job-options.interface.js';
import { ADMITTED, Lock, type FailedAttempt, type JobEnqueueLock, type LockRun } from './lock.js';

/**
 * Locked from enqueue until a worker starts the job: at most one queued job per digest, while a running one does not
 * block a new one. A failed attempt takes the lock back until the next start (unless another job took it meanwhile).
 */
export class UntilExecutingLock extends Lock {
  readonly type: LockType = 'until_executing';
  readonly conflictSides: readonly ConflictSide[] = ['client'];

  /** Start: release (a running job does not block a new one). */
  override async start(run: LockRun) {
    await run.enqueueLock?.release();
    return ADMITTED;
  }

  /**
   * Failed attempt: take it back, so the job never waits for its retry unlocked (not when BullMQ fails it for good). A
   * job of the digest enqueued while this one ran may hold it: then this one is not retried (that job runs instead).
   */
  override async attemptFailed(run: LockRun, attempt: FailedAttempt) {
    if (await attempt.endsJob()) return ADMITTED;
    return (await run.enqueueLock?.retake()) ?? ADMITTED;
  }

  /** Failed for good: release what is still held. */
  override async finished(run: LockRun) {
    await run.enqueueLock?.releaseAtEnd();
  }

  /** Back from failed or completed: take the lock again. */
  override reentering(enqueueLock: JobEnqueueLock) {
    return enqueueLock.retake();
  }
}
