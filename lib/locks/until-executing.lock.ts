import { Lock } from './lock.js';

/**
 * Locked from enqueue until a worker starts the job: at most one queued job per digest, while a running one does not
 * block a new one. A failed attempt that will be retried takes the lock again until its next start.
 */
export class UntilExecutingLock extends Lock {
  readonly type = 'until_executing';
  readonly locksAtEnqueue = true;
  override readonly releaseEnqueueLock = 'on-start';
  override readonly relockOnRetry = true;
}
