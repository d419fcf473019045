import { ADMITTED, Lock, type FailedAttempt, type JobEnqueueLock, type LockRun } from './lock.js';

/**
 * Locked from enqueue until the job ends: no second job per digest while one is queued, running or waiting for a
 * retry. Released when BullMQ records the job completed or failed for good, so a dead job never blocks its digest.
 */
export class UntilExecutedLock extends Lock {
  readonly type = 'until_executed';
  readonly conflictSides = ['client'] as const;

  /** Start: keep the lock. A job that was here before (retried, recovered, brought back) makes sure it still holds it. */
  override start(run: LockRun) {
    return run.restarted && run.enqueueLock ? run.enqueueLock.retake() : Promise.resolve(ADMITTED);
  }

  /** Success: release (it lands before BullMQ records the completion). */
  override async succeeded(run: LockRun) {
    await run.enqueueLock?.releaseAtEnd(true);
  }

  /** Failed attempt: keep the lock while the job waits for its retry; release it if BullMQ fails the job for good. */
  override async attemptFailed(run: LockRun, attempt: FailedAttempt) {
    if (await attempt.endsJob()) await run.enqueueLock?.releaseAtEnd(true);
    return ADMITTED;
  }

  /** Failed for good (or ended through a conflict strategy): release what is still held. */
  override async finished(run: LockRun) {
    await run.enqueueLock?.releaseAtEnd();
  }

  /** Back from failed or completed: take the lock again. */
  override reentering(enqueueLock: JobEnqueueLock) {
    return enqueueLock.retake();
  }
}
