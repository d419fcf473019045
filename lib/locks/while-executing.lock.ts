import { Lock } from './lock.js';

/**
 * No lock at enqueue; a run-time lock around the handler, so two jobs with one digest never run at the same time.
 * Released in every outcome.
 */
export class WhileExecutingLock extends Lock {
  readonly type = 'while_executing';
  readonly locksAtEnqueue = false;
  override readonly locksWhileRunning = true;
}
