import type { Job } from 'bullmq';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { LockStore, ParkedSlot } from '../locks/lock-store.js';
import { bullKeys } from '../redis/keys.js';
import {
  parseRuntimeLockOwner,
  PARKER_REPLACED,
  queueTag,
  type RuntimeLockOwner,
} from '../redis/runtime-lock-owner.js';

/**
 * Gives back the slots of a run-time lock (`key`, of `digest`) parked for a step job's next delivery whose job will not
 * come back for them: finished (a parent failed by its child while it waited for its children, `failParentOnFailure`),
 * gone (a parked job removed without the library), or its id given to another job since (see `readParkerStanding`).
 * `job`'s take met them: without this it would have met a holder that never runs again, and ended through its strategy
 * (`log`: not run at all) until the orphan reaper's next pass released the slot, a parked slot lasting a day past its
 * job's run time. Each is given back compare-and-set on the lease the take read (a slot re-taken meanwhile is left
 * alone), with a `reaped` event as the reaper gives. A holder's job is looked up in the queue its owner names: `job`'s
 * own, or another queue (a lock across queues) found by its tag among the queues the library's processes record
 * (`registered`, read only when such a holder is met; one it does not name is left to the reaper). The holders' jobs
 * are read together (one round trip); asked only on a refusal that names parked slots. Resolves whether one was given
 * back; never rejects (a read or give-back that fails goes to `failed`).
 */
export async function freeStaleParked(
  store: LockStore,
  events: UniqueJobsEvents,
  job: Job<unknown, unknown>,
  /** The lock's key and digest. */
  { key, digest }: { key: string; digest: string },
  parked: readonly ParkedSlot[],
  /** A read or give-back that failed: the others go on (a slot freed lets the take through). */
  failed: (error: unknown) => void,
  /** The qualified names of the queues the library's processes record (`QueueRegistry.read`). */
  registered: () => Promise<readonly string[]>,
): Promise<boolean> {
  const own = job.queueQualifiedName;
  const tag = queueTag(own);
  let names: Promise<readonly string[]> | undefined;
  const queueOf = async (owner: RuntimeLockOwner): Promise<string | undefined> => {
    if (owner.queue !== undefined) return owner.queue; // an earlier build's owner of a lock across queues
    if (owner.queueTag === undefined) return undefined; // an earlier build's bare id: any queue, the reaper's
    if (owner.queueTag === tag) return own;
    names ??= registered().catch((error: unknown) => {
      failed(error);
      return [];
    });
    const found = (await names).filter((name) => queueTag(name) === owner.queueTag);
    return found.length === 1 ? found[0] : undefined;
  };
  const located = await Promise.all(
    parked.map(async (slot) => {
      const owner = parseRuntimeLockOwner(slot.member);
      return { ...slot, owner, queue: await queueOf(owner) };
    }),
  );
  const holders = located.filter(
    (holder): holder is typeof holder & { queue: string } =>
      holder.queue !== undefined && !(holder.queue === own && holder.owner.jobId === job.id),
  );
  // Their jobs read together (sent in one tick: one round trip), then each stale one given back.
  const standings = await Promise.allSettled(
    holders.map(({ owner, queue }) => store.jobs.parkerStanding(bullKeys.job(queue, owner.jobId), digest)),
  );
  const freed = await Promise.allSettled(
    holders.map(async ({ member, lease, owner }, i) => {
      const read = standings[i];
      if (read.status === 'rejected') throw read.reason;
      if (read.value === 'live' || !(await store.releaseLease(key, member, lease))) return false;
      const reason = read.value === 'another' ? PARKER_REPLACED : `job ${read.value}`;
      events.emit({ type: 'reaped', key, kind: 'runtimeLease', jobId: owner.jobId, reason });
      return true;
    }),
  );
  for (const outcome of freed) if (outcome.status === 'rejected') failed(outcome.reason);
  return freed.some((outcome) => outcome.status === 'fulfilled' && outcome.value);
}
