import type { Job } from 'bullmq';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { LockStore, ParkedSlot } from '../locks/lock-store.js';
import { bullKeys } from '../redis/keys.js';
import { parseRuntimeLockOwner, queueTag } from '../redis/runtime-lock-owner.js';

/**
 * Gives back the slots of a run-time lock (`key`) parked for a step job's next delivery whose job will not come back
 * for them: finished (a parent failed by its child while it waited for its children, `failParentOnFailure`) or gone (a
 * parked job removed without the library). `job`'s take met them: without this it would have met a holder that never
 * runs again, and ended through its strategy (`log`: not run at all), until the orphan reaper's next pass released
 * the slot. Each is given back compare-and-set on the lease the take read (a slot re-taken meanwhile is left alone),
 * with a `reaped` event as the reaper gives. Only holders of `job`'s own queue: another queue's are the reaper's. The
 * holders' jobs are read together (one round trip); asked only on a refusal that names parked slots. Resolves whether
 * one was given back; never rejects (a read or give-back that fails goes to `failed`).
 */
export async function freeStaleParked(
  store: LockStore,
  events: UniqueJobsEvents,
  job: Job<unknown, unknown>,
  key: string,
  parked: readonly ParkedSlot[],
  /** A read or give-back that failed: the others go on (a slot freed lets the take through). */
  failed: (error: unknown) => void,
): Promise<boolean> {
  const queue = job.queueQualifiedName;
  const tag = queueTag(queue);
  const holders = parked
    .map((slot) => ({ ...slot, owner: parseRuntimeLockOwner(slot.member) }))
    .filter(({ owner }) => (owner.queueTag === tag || owner.queue === queue) && owner.jobId !== job.id);
  // Their jobs read together (sent in one tick: one round trip), then each stale one given back.
  const standings = await Promise.allSettled(
    holders.map(({ owner }) => store.jobs.standing(bullKeys.job(queue, owner.jobId))),
  );
  const freed = await Promise.allSettled(
    holders.map(async ({ member, lease, owner }, i) => {
      const read = standings[i];
      if (read.status === 'rejected') throw read.reason;
      if (read.value === 'live' || !(await store.releaseLease(key, member, lease))) return false;
      events.emit({ type: 'reaped', key, kind: 'runtimeLease', jobId: owner.jobId, reason: `job ${read.value}` });
      return true;
    }),
  );
  for (const outcome of freed) if (outcome.status === 'rejected') failed(outcome.reason);
  return freed.some((outcome) => outcome.status === 'fulfilled' && outcome.value);
}
