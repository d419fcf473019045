import { hash } from 'node:crypto';

// The owner of a run-time lock slot (a member of `<prefix>:{<digest>}:running`, see `UniqueJobsKeys.runtimeLock`):
// how a job writes it, and how it is read back.

/** How a run-time lock owner written as a JSON pair begins. */
const PAIR_START = '["';

/** Queue tags computed ({@link queueTag}), by qualified name: one per queue a process sees. */
const QUEUE_TAGS = new Map<string, string>();
/** Tags kept at most (a process that sees more queues computes the others each time). */
const MAX_QUEUE_TAGS = 10_000;

/**
 * The tag a run-time lock owner names its queue by: `#` and the first 12 hex digits (48 bits) of the SHA-256 of the
 * queue's qualified name. Short, so that a member stays within Redis' compact sorted-set encoding (64 bytes by
 * default) for ids up to 44 characters (a UUID) whatever the queue's name; it holds no `:`, which every qualified name
 * holds, so a tag and a name are never taken for each other.
 */
export function queueTag(queueQualifiedName: string): string {
  let tag = QUEUE_TAGS.get(queueQualifiedName);
  if (tag === undefined) {
    tag = `#${hash('sha256', queueQualifiedName, 'hex').slice(0, 12)}`;
    if (QUEUE_TAGS.size < MAX_QUEUE_TAGS) QUEUE_TAGS.set(queueQualifiedName, tag);
  }
  return tag;
}

/**
 * The owner a job writes into a run-time lock (a member of `<prefix>:{<digest>}:running`): its queue's tag
 * ({@link queueTag}) and its id as a JSON pair. A job id names a job only within its queue (BullMQ numbers each queue's
 * jobs from 1, and a job scheduler's ids are the same on every queue it runs on), so that a job of another queue with
 * the same id is never taken for the holder: neither by a take (a lock shared across queues) nor by the orphan reaper,
 * which checks the owner of a parked slot in its queue alone.
 */
export function runtimeLockOwner(jobId: string, queueQualifiedName: string): string {
  return JSON.stringify([queueTag(queueQualifiedName), jobId]);
}

/**
 * The owner earlier development builds of 0.1 wrote for a job's run-time lock: for a lock shared across queues, its
 * queue's qualified name and id as a JSON pair; else the bare job id (an id that itself starts with `["` as the pair
 * `['', id]`, so that every member starting with `["` is a pair). A take accepts a slot held under this form as its
 * own (a job recovered, or resumed after a step, by an upgraded worker), and the orphan reaper checks a bare id in every
 * queue.
 */
export function legacyRuntimeLockOwner(jobId: string, acrossQueuesOf?: string): string {
  if (acrossQueuesOf !== undefined) return JSON.stringify([acrossQueuesOf, jobId]);
  return jobId.startsWith(PAIR_START) ? JSON.stringify(['', jobId]) : jobId;
}

/** A run-time lock owner read back: its job id, and its queue when it names it (by tag, or by name in earlier builds). */
export interface RuntimeLockOwner {
  jobId: string;
  /** The queue's qualified name (an owner of a lock across queues written by an earlier build). */
  queue?: string;
  /** The queue's tag ({@link queueTag}). */
  queueTag?: string;
}

/** The job id, and how it names its queue, of a run-time lock owner ({@link runtimeLockOwner}). */
export function parseRuntimeLockOwner(owner: string): RuntimeLockOwner {
  if (owner.startsWith(PAIR_START)) {
    try {
      const pair: unknown = JSON.parse(owner);
      if (Array.isArray(pair) && pair.length === 2 && typeof pair[0] === 'string' && typeof pair[1] === 'string') {
        const [queue, jobId] = pair as [string, string];
        if (queue === '') return { jobId };
        return queue.includes(':') ? { queue, jobId } : { queueTag: queue, jobId };
      }
    } catch {
      // not a pair: an id written by a build before pairs (ids starting with `["` were kept as they were)
    }
  }
  return { jobId: owner };
}

/** Whether the owner read back names the queue `queueQualifiedName` (`undefined`: it names none, a bare id). */
export function ownerNamesQueue(owner: RuntimeLockOwner, queueQualifiedName: string): boolean | undefined {
  if (owner.queue !== undefined) return owner.queue === queueQualifiedName;
  if (owner.queueTag !== undefined) return owner.queueTag === queueTag(queueQualifiedName);
  return undefined;
}

/** A job's run-time lock owner ({@link runtimeLockOwner}), and the one earlier builds wrote for it (`former`). */
export function runtimeOwnersOf(
  job: { readonly id?: string; readonly queueQualifiedName: string },
  acrossQueues: boolean,
): { owner: string; former: string } {
  const jobId = job.id!;
  return {
    owner: runtimeLockOwner(jobId, job.queueQualifiedName),
    former: legacyRuntimeLockOwner(jobId, acrossQueues ? job.queueQualifiedName : undefined),
  };
}

/** Why a parked slot whose owner's id now names a job that did not park it is released (`reaped` event's reason). */
export const PARKER_REPLACED = 'its job id now names a job that did not park it';
