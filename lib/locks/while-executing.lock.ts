import { Lock, type LockRun } from './lock.js';

/**
 * No lock at enqueue; a run-time lock around the handler, so no two jobs of a digest run at the same time. The worker
 * gives it back after every attempt, whatever its outcome.
 */
export class WhileExecutingLock extends Lock {
  readonly type = 'while_executing';
  readonly conflictSides = ['server'] as const;

  /** Start: take the run-time lock (or meet the server strategy). */
  override start(run: LockRun) {
    return run.takeRuntimeLock();
  }
}
