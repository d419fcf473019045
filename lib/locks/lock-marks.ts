import { randomInt } from 'node:crypto';

/**
 * Whether a move of a job's run time may end its hold sooner than the hold ends now. The id may name another job by the
 * time the move lands (the one read removed, another added with the same id), whose hold must not end before it runs:
 * `'never'` (the move follows a job read earlier: a retry's backoff, a handler's move), or, checked in the script that
 * moves it, only while the hold is still the one read before the move: a slot whose lease (`leaseRead`, as stored)
 * carries the mark it still has; a deduplication key whose job (in the key's slot) still has the timestamp it was
 * added with (`addedAt`).
 */
export type SoonerEnd = 'never' | { readonly leaseRead: string } | { readonly addedAt: number };

/**
 * A new take's mark: a fraction k/1024 (0 < k < 1022) its lease expiry carries, kept by its renewals, so that two takes
 * of one owner (a job and its copy recovered after a stall) are told apart whatever answers were lost. Two takes draw
 * the same mark once in 1,021.
 */
export function takeMark(): string {
  return String(randomInt(1, 1022) / 1024);
}

/**
 * The mark of a run-time lock slot whose handler runs on after its worker closed with force (`RuntimeLease.closeOff`):
 * no take draws it, and a take of the same owner does not re-enter it. `worker.close(true)` stops BullMQ's renewals of
 * the job's lock while the handler goes on, so another worker recovers the job as stalled: that copy waits for this
 * handler's end instead of running beside it. (A graceful close waits for its handlers, renewing their job locks.)
 */
export const CLOSED_MARK = String(1022 / 1024);

/**
 * The mark of a run-time lock slot parked for a step job's next delivery (`RuntimeLease.park`): no take draws it, so the
 * orphan reaper can tell a parked slot (no handler renews it) and release it once its job is gone or finished.
 */
export const PARKED_MARK = String(1023 / 1024);

/** Whether a lock slot's score (its lease expiry) carries {@link PARKED_MARK}. */
export function isParkedScore(score: number): boolean {
  return score % 1 === 1023 / 1024;
}
