import type { ConflictSide } from '../interfaces/conflict-strategy.interface.js';
import type { LockType } from '../interfaces/unique-job-options.interface.js';

/** When a lock type lets go of its enqueue lock. */
export type EnqueueLockRelease = 'on-start' | 'on-finish' | 'on-expiry';

/**
 * A lock type: a small policy object saying what the lock does at enqueue, start, success, retry and death. The job
 * interceptor carries the policy out, so every lock type moves through the same code (see docs/how-locks-move.md).
 * Adding a lock type is adding a subclass and a line in `locks/index.ts`.
 */
export abstract class Lock {
  /** The name used in `@UniqueJob({ lock })`. */
  abstract readonly type: LockType;
  /** Takes a lock when the job is enqueued. */
  abstract readonly locksAtEnqueue: boolean;
  /** When the enqueue lock is released (ignored without one). */
  readonly releaseEnqueueLock: EnqueueLockRelease = 'on-finish';
  /** Takes the enqueue lock again when an attempt fails and will be retried (the job is queued again). */
  readonly relockOnRetry: boolean = false;
  /** Holds a run-time lock (a renewed lease) while the handler runs. */
  readonly locksWhileRunning: boolean = false;
  /** Needs `lockTtl`. */
  readonly requiresTtl: boolean = false;
  /** The strategy of each side when `onConflict` leaves it unset. */
  readonly defaultStrategy: Readonly<Record<ConflictSide, string>> = { client: 'log', server: 'log' };

  /** The sides on which this lock meets duplicates, so the strategies they need. */
  get conflictSides(): ConflictSide[] {
    const sides: ConflictSide[] = [];
    if (this.locksAtEnqueue) sides.push('client');
    if (this.locksWhileRunning) sides.push('server');
    return sides;
  }
}
