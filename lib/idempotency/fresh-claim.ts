import { LeaseKeeper } from '../locks/lease-keeper.js';
import type { IdempotencyClaim, IdempotencyClaimResult, IdempotencyStore } from './idempotency-store.interface.js';

/** A claim's answer, and when the command its lease counts from was sent. */
export interface FreshClaim {
  /** The store's answer: won (or this attempt's own record), or the record that holds the key. */
  claim: IdempotencyClaimResult;
  /**
   * When the command that last gave this attempt its lease was sent (ms): the claim, or the renewal that confirmed a
   * claim answered late. The lease keeper counts from it.
   */
  sentAt: number;
}

/** Whether `claim` gives the key to `owner`: won, or a live record of its own (a claim resent after a dropped connection). */
export function heldBy(claim: IdempotencyClaimResult, owner: string): boolean {
  return claim.claimed || (claim.record.state === 'in_progress' && claim.record.owner === owner);
}

/**
 * Claims a key for plain mode, counting its lease from when the claim was sent, not from when its answer was read. An
 * answer read once the lease's first renewal is due (an event-loop stall between the send and the read: a CPU-bound
 * handler of another job, a GC pause) may be about a lease that has ended meanwhile, and another delivery may have
 * taken the key over: the claim is then renewed first, by its owner token (a compare-and-set), and kept only when
 * still this attempt's. When it is not, the key is claimed again, so the caller meets whoever holds it now (a duplicate
 * in progress, or a completed record to replay) exactly as any duplicate does. An answer read in time costs nothing
 * more; a late one costs the renewal the lease keeper would have sent at once anyway.
 */
export async function claimFresh(store: IdempotencyStore, request: IdempotencyClaim): Promise<FreshClaim> {
  const { scope, key, owner, leaseMs } = request;
  const due = LeaseKeeper.renewalPeriod(leaseMs);
  let sentAt = Date.now();
  let claim = await store.claim(request);
  while (heldBy(claim, owner) && Date.now() - sentAt >= due) {
    sentAt = Date.now();
    // A renewal's answer read late is asked about again, as the claim's was.
    if (await store.renew({ scope, key, owner }, leaseMs)) continue;
    // Lost before the handler started (taken over, or settled or released by the one who took it over): ask again.
    sentAt = Date.now();
    claim = await store.claim(request);
  }
  return { claim, sentAt };
}
