import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import { LeaseKeeper } from '../locks/lease-keeper.js';
import type { IdempotencyClaim, IdempotencyClaimResult, IdempotencyStore } from './idempotency-store.interface.js';
import { performance } from 'node:perf_hooks';

/** A claim's answer, and when the command its lease counts from was sent. */
export interface FreshClaim {
  /** The store's answer: won (or this attempt's own record), or the record that holds the key. */
  claim: IdempotencyClaimResult;
  /**
   * When the command that last gave this attempt its lease was sent (`performance.now()`, ms): the claim, or the
   * renewal that confirmed a claim answered late. The lease keeper counts from it.
   */
  sentAt: number;
}

/** Whether `claim` gives the key to `owner`: won, or a live record of its own (a claim resent after a dropped connection). */
export function heldBy(claim: IdempotencyClaimResult, owner: string): boolean {
  return claim.claimed || (claim.record.state === 'in_progress' && claim.record.owner === owner);
}

/**
 * How many confirmations in a row may come back too late before the attempt gives up (each took about a lease: the
 * store cannot keep a lease that short).
 */
const MAX_LATE_ANSWERS = 5;

/**
 * Claims a key for plain mode, counting its lease from when the claim was sent, not from when its answer was read. An
 * answer read once the lease's first renewal is due (an event-loop stall between the send and the read: a CPU-bound
 * handler of another job, a GC pause) may be about a lease that has ended meanwhile, and another delivery may have
 * taken the key over: the claim is then renewed first, by its owner token (a compare-and-set), and kept only when
 * still this attempt's. When it is not, the key is claimed again, so the caller meets whoever holds it now (a duplicate
 * in progress, or a completed record to replay) exactly as any duplicate does. An answer read in time costs nothing
 * more; a late one costs the renewal the lease keeper would have sent at once anyway.
 *
 * A renewal that succeeded extended the lease from its send at least: read within a lease of its send, it confirms the
 * claim (the lease keeper, counting from that send, renews again at once when it is due). Only one read a lease or
 * more after its send is asked about again, so a store whose every answer takes more than a third of the lease (a slow
 * link, a loaded database) still lets the handler start. One that keeps answering later than the lease itself fails
 * the attempt after {@link MAX_LATE_ANSWERS} tries (the caller releases the claim; the job is retried as BullMQ does).
 */
export async function claimFresh(store: IdempotencyStore, request: IdempotencyClaim): Promise<FreshClaim> {
  const { scope, key, owner, leaseMs } = request;
  const due = LeaseKeeper.renewalPeriod(leaseMs);
  let sentAt = performance.now();
  let claim = await store.claim(request);
  // How late an answer may be read and still be relied on: a claim's, until its first renewal is due; a renewal's,
  // until the lease it extended could have ended.
  let inTime = due;
  for (let late = 1; heldBy(claim, owner) && performance.now() - sentAt >= inTime; late++) {
    if (late > MAX_LATE_ANSWERS) {
      throw new UniqueJobsError(
        `Idempotency key "${key}" (scope "${scope}"): the store's answers came back later than the lease (${leaseMs} ms) ${MAX_LATE_ANSWERS} times in a row; the claim could not be confirmed and the handler did not start (raise the lease, or see to the store's latency)`,
      );
    }
    sentAt = performance.now();
    if (await store.renew({ scope, key, owner }, leaseMs)) {
      inTime = leaseMs;
      continue;
    }
    // Lost before the handler started (taken over, or settled or released by the one who took it over): ask again.
    sentAt = performance.now();
    claim = await store.claim(request);
    inTime = due;
  }
  return { claim, sentAt };
}
