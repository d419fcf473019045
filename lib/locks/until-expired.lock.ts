import { Lock } from './lock.js';

/** Locked from enqueue until `lockTtl` passes, whatever happens to the job: "at most once per period". */
export class UntilExpiredLock extends Lock {
  readonly type = 'until_expired';
  readonly locksAtEnqueue = true;
  override readonly releaseEnqueueLock = 'on-expiry';
  override readonly requiresTtl = true;
}
