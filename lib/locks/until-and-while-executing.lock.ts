import { ADMITTED, Lock, type FailedAttempt, type JobEnqueueLock, type LockRun } from './lock.js';

/**
 * An enqueue lock released when the job starts, plus a run-time lock while it runs: at most one queued and one running
 * job per digest. The run-time lock is taken first, so a job that meets a running duplicate keeps its place in line;
 * by default it is rescheduled until the running one is done (a queued copy carries newer data: it must not vanish).
 */
export class UntilAndWhileExecutingLock extends Lock {
  readonly type = 'until_and_while_executing';
  readonly conflictSides = ['client', 'server'] as const;
  override readonly defaultStrategy = { client: 'log', server: 'reschedule' };

  /** Start: take the run-time lock, then release the enqueue lock (a conflict keeps it: the job stays in line). */
  override async start(run: LockRun) {
    const held = await run.takeRuntimeLock();
    if (held.acquired) await run.enqueueLock?.release();
    return held;
  }

  /**
   * Failed attempt: take the enqueue lock back for the retry (not when BullMQ fails the job for good). A job queued
   * while this one ran may hold it: then this one is not retried (that job runs instead).
   */
  override async attemptFailed(run: LockRun, attempt: FailedAttempt) {
    if (await attempt.endsJob()) return ADMITTED;
    return (await run.enqueueLock?.retake()) ?? ADMITTED;
  }

  /** Ended (failed for good, or through a conflict strategy): release the enqueue lock still held. */
  override async finished(run: LockRun) {
    await run.enqueueLock?.releaseAtEnd();
  }

  /** Back from failed or completed: take the enqueue lock again. */
  override reentering(enqueueLock: JobEnqueueLock) {
    return enqueueLock.retake();
  }
}
