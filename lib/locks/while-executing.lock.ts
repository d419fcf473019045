import { Lock, type LockRun } from './lock.js';

/**
 * No lock at enqueue; a run-time lock around the handler, so no two jobs of a digest run at the same time. The worker
 * gives it back after every attempt, whatever its outcome. A job enqueued under another lock type before the options
 * changed holds the enqueue lock it took then: it gives it back at its end (as `until_executed` does).
 */
export class WhileExecutingLock extends Lock {
  readonly type = 'while_executing';
  readonly conflictSides = ['server'] as const;
  override readonly takesRuntimeLock = true;

  /** Start: take the run-time lock (or meet the server strategy). */
  override start(run: LockRun) {
    return run.takeRuntimeLock();
  }

  /** Success: an enqueue lock the job took under earlier options is released (before BullMQ records the end). */
  override async succeeded(run: LockRun) {
    await run.enqueueLock?.releaseAtEnd(true);
  }

  /** Failed for good (or ended through the strategy): an enqueue lock taken under earlier options is released. */
  override async finished(run: LockRun) {
    await run.enqueueLock?.releaseAtEnd();
  }
}
