// What each lock type promises, in one table: the model test (lifecycle.model.spec.ts) checks the real system against it
// after every step. It reads like docs/how-locks-move.md; where the docs leave a case open, the line says so and follows
// what the lead decided (marked "lead").
import type { LockType } from '../../lib/index.js';

/** A BullMQ job state as `Queue#getJobState` answers it ('unknown': the job is gone). */
export type JobState = 'waiting' | 'prioritized' | 'delayed' | 'active' | 'completed' | 'failed' | 'unknown';

/** The states of a job that has not started its current attempt: queued, scheduled, or waiting for a retry. */
const NOT_STARTED: readonly JobState[] = ['waiting', 'prioritized', 'delayed'];
/** The states of a job that is not finished: queued, scheduled, waiting for a retry, or running. */
const LIVE: readonly JobState[] = [...NOT_STARTED, 'active'];

export interface LockPromise {
  /**
   * Which of the digest's jobs hold its enqueue lock, by their BullMQ state: `'period'` for `until_expired` (every job
   * accepted in the period, whatever became of it: the lock only ends with its TTL); `[]` for no enqueue lock.
   * Invariant 1: at most `lockLimit` such jobs. Invariant 3: each of them is a holder of the lock key, and (once the
   * reaper ran, or at any time on the fast path) nothing else is.
   */
  heldIn: readonly JobState[] | 'period';
  /** At most `lockLimit` handlers of a digest run at once (invariant 2); each running handler holds a lease. */
  runtime: boolean;
  /**
   * `job.retry()` of a failed or completed job queues it again, so it must take the enqueue lock again (lead: "it must
   * take it again; when another job holds it, `retry()` throws DuplicateJobError and the job stays failed"). Not for
   * `until_expired` (the job already holds its period) nor `while_executing` (no enqueue lock).
   */
  retryRetakesLock: boolean;
}

/** docs/how-locks-move.md, the table at the top, as states. */
export const PROMISES: Readonly<Record<LockType, LockPromise>> = {
  // Take at enqueue, release at start; a failed attempt that will retry takes it back. Lead: a job waiting for its
  // retry counts ("jobs not yet started in this attempt ... including jobs waiting for a retry").
  until_executing: { heldIn: NOT_STARTED, runtime: false, retryRetakesLock: true },
  // Take at enqueue; keep through start and retries; release on success or death.
  until_executed: { heldIn: LIVE, runtime: false, retryRetakesLock: true },
  // Take at enqueue with TTL lockTtl (+ delay); nothing but the TTL ends it.
  until_expired: { heldIn: 'period', runtime: false, retryRetakesLock: false },
  // No enqueue lock; a run-time lease around the handler, released in every outcome.
  while_executing: { heldIn: [], runtime: true, retryRetakesLock: false },
  // Enqueue lock until the run-time lease is taken at start; taken back by a job that will run again.
  until_and_while_executing: { heldIn: NOT_STARTED, runtime: true, retryRetakesLock: true },
};

/** The gaps the docs admit, each one a place where a lock may outlive what the table above says. */
export const DOCUMENTED_GAPS = {
  /**
   * "A job removed in bulk (clean, drain, obliterate) or behind the library's back keeps its general-path slot until
   * that lease ends, or until the orphan reaper releases it; one removed through a guarded queue (job.remove,
   * queue.remove) gives it back at once, unless the lock is unique across queues; the fast path has no such gap." So on
   * the general path a job removed in bulk may still be a holder until the next reaper run. (Invariant 4 still wants a
   * duplicate to name a job that exists.)
   */
  removedJobKeepsGeneralPathSlotUntilReaped: true,
  /**
   * "worker crash: the lease expires ≤ runtimeLockLease after the crash; the recovered job (same owner) may take it at
   * once." A job whose last run was killed may hold its run-time slot for the rest of that lease (30 s, longer than a
   * sequence), even after the reaper ran.
   */
  killedRunKeepsLeaseUntilItEnds: true,
  /**
   * until_executing, until_and_while_executing: a job whose own handler moved it back (moveToDelayed + DelayedError)
   * while another job of the digest was enqueued cannot take the lock back, and the library cannot refuse the move: it
   * waits without the lock, and both run, one after the other (docs/how-locks-move.md).
   */
  jobMovedByItsHandlerMayLoseItsLock: true,
} as const;

/**
 * Where the docs allow what the lead's invariants forbid. `false` (the default) holds the library to the invariant;
 * `true` would accept the documented behaviour instead. Both are reported in the test's findings.
 */
export const DOCS_OVER_INVARIANTS = {
  /**
   * Docs, until_executing / until_and_while_executing, "failed, will retry": "take it back (unless another job holds
   * it)". A job enqueued while the first one ran holds the lock, the first then waits for its retry without it: two
   * jobs not yet started. Invariant 1 (lead) counts jobs waiting for a retry.
   */
  retryWaitingJobMayLoseItsLock: process.env.MODEL_DOCS_RETRY === '1',
  /**
   * Docs: a hand-removed job keeps its general-path slot until it is met 15 s after it was taken (a slot younger than
   * that may belong to a job being added right now: dropping it would admit one job too many) or until the reaper
   * runs (DOCUMENTED_GAPS), so a duplicate may name it meanwhile. Invariant 4 (lead) otherwise wants a duplicate to name
   * a job that exists at the time of the answer. `MODEL_DOCS_GAP=0` holds the library to that.
   */
  duplicateMayNameRemovedHolder: process.env.MODEL_DOCS_GAP !== '0',
};

/** Whether a job in `state` holds its digest's enqueue lock (`period` locks: see {@link LockPromise.heldIn}). */
export function holdsEnqueueLock(lock: LockType, state: JobState): boolean {
  const heldIn = PROMISES[lock].heldIn;
  return heldIn === 'period' ? true : heldIn.includes(state);
}

/** Whether the lock type takes a lock at enqueue. */
export function locksAtEnqueue(lock: LockType): boolean {
  const heldIn = PROMISES[lock].heldIn;
  return heldIn === 'period' || heldIn.length > 0;
}
