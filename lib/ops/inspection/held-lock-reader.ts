import type { Cluster, Redis } from 'ioredis';
import { QueueRegistry } from '../../redis/queue-registry.js';
import { bullKeys, type UniqueJobsKeys } from '../../redis/keys.js';
import {
  legacyRuntimeLockOwner,
  ownerNamesQueue,
  parseRuntimeLockOwner,
  runtimeLockOwner,
  type RuntimeLockOwner,
} from '../../redis/runtime-lock-owner.js';
import { JobOwners, type Candidate } from './job-owners.js';
import type {
  HeldLock,
  HeldLockKind,
  HeldLockStorage,
  InspectedQueue,
  LockFilter,
} from './lock-inspection.interface.js';

/**
 * Owners of one lock key read and resolved at most (a lock with `lockLimit` > 1 may have any number of holders):
 * the rest are counted ({@link HeldLock.moreOwners}, one ZCARD), not read, so that a lock of 10,000 holders costs a
 * page what a lock of 20 does.
 */
export const MAX_OWNERS_PER_LOCK = 20;

/** An owner as the lock key names it: its job id, its lease (sorted sets) and, for a run-time lock, its queue. */
interface RawOwner extends RuntimeLockOwner {
  leaseExpiresAt?: number;
}

/**
 * Reads one lock key and its owners for the {@link LockInspector}: the key's holder (a deduplication key) or its first
 * {@link MAX_OWNERS_PER_LOCK} members by score (a sorted set: earliest lease first) and how many there are, then each
 * owner's job in the queues. A lock costs at most three commands (with a job-id filter not met among the owners read:
 * plus one ZSCORE per form of the job's member, its id and its queue and id for each inspected queue; with a run-time
 * owner whose queue tag names no inspected queue: one SMEMBERS of the library's queue registry) and one transaction per
 * owner read and queue searched, whatever its number of holders. A job-id filter's listing asks {@link mayHold} of
 * each key first (one command), and reads this way only the keys that pass.
 */
export class HeldLockReader {
  private readonly owners: JobOwners;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly queues: readonly InspectedQueue[],
    private readonly keys: UniqueJobsKeys,
  ) {
    this.owners = new JobOwners(client);
  }

  /** Reads a lock key and its owners; `undefined` when it is gone or the filter leaves it out. */
  async describe(candidate: Candidate, filter: LockFilter, withData: boolean): Promise<HeldLock | undefined> {
    const { key, storage } = candidate;
    let owners: RawOwner[];
    let total: number;
    let ttl: number;
    if (storage === 'deduplication') {
      const [holder, pttl] = await Promise.all([this.client.get(key), this.client.pttl(key)]);
      if (holder === null) return undefined;
      owners = [{ jobId: holder }];
      total = 1;
      ttl = pttl;
    } else {
      const [members, count, pttl] = await Promise.all([
        this.client.zrange(key, 0, String(MAX_OWNERS_PER_LOCK - 1), 'WITHSCORES'),
        this.client.zcard(key),
        this.client.pttl(key),
      ]);
      owners = [];
      const ownerOf = ownerParser(storage);
      for (let i = 0; i + 1 < members.length; i += 2) {
        owners.push({ ...ownerOf(members[i]), leaseExpiresAt: leaseEnd(members[i + 1]) });
      }
      if (owners.length === 0) return undefined;
      total = Math.max(count, owners.length);
      ttl = pttl;
      if (filter.jobId !== undefined && total > owners.length) {
        const wanted = await this.unreadOwner(key, storage === 'running', filter.jobId, owners);
        if (wanted) owners.push(wanted);
      }
    }
    if (filter.jobId !== undefined && !owners.some((owner) => owner.jobId === filter.jobId)) return undefined;
    await this.nameTaggedQueues(owners);
    const searched = candidate.queue
      ? [candidate.queue]
      : this.queues.filter((queue) => filter.queue === undefined || queue.name === filter.queue);
    const resolved = await Promise.all(
      // An owner that names its queue (a run-time lock's, when inspected or written by an earlier build): read there.
      // One whose tag names no queue known here is in none of the inspected queues: it is read nowhere (missing), and
      // keeps its tag (its job may be alive in that queue).
      owners.map(async ({ queue: ownerQueue, queueTag, ...owner }) => {
        if (queueTag !== undefined) return { ...(await this.owners.resolve(owner, candidate, [], withData)), queueTag };
        return this.owners.resolve(
          owner,
          candidate,
          ownerQueue !== undefined ? [queueOf(ownerQueue)] : searched,
          withData,
        );
      }),
    );
    const queue = candidate.queue?.name ?? resolved.find((owner) => owner.queue !== undefined)?.queue;
    if (filter.queue !== undefined && queue !== filter.queue) return undefined;
    return {
      digest: candidate.digest,
      kind: kindOf(storage),
      storage,
      key,
      ...(queue === undefined ? {} : { queue }),
      owners: resolved,
      ...(total > resolved.length ? { moreOwners: total - resolved.length } : {}),
      ...(ttl >= 0 ? { ttlMs: ttl } : {}),
    };
  }

  /**
   * Whether `jobId` holds a lock key, as {@link describe} would find it: a deduplication key's holder, or one of a
   * sorted set's first {@link MAX_OWNERS_PER_LOCK} members (one read), or past them ({@link unreadOwner}: a second read,
   * for a lock of that many holders only). A job-id filter asks this first, which most keys fail, and reads whole only
   * the keys that pass.
   */
  async mayHold(candidate: Candidate, jobId: string): Promise<boolean> {
    const { key, storage } = candidate;
    if (storage === 'deduplication') return (await this.client.get(key)) === jobId;
    const members = await this.client.zrange(key, 0, String(MAX_OWNERS_PER_LOCK - 1));
    const ownerOf = ownerParser(storage);
    if (members.some((member) => ownerOf(member).jobId === jobId)) return true;
    if (members.length < MAX_OWNERS_PER_LOCK) return false;
    return (await this.unreadOwner(key, storage === 'running', jobId, [])) !== undefined;
  }

  /**
   * A job's membership of a sorted-set lock beyond the members read: by the member it writes (an enqueue lock's: its
   * id; a run-time lock's: its queue's tag and id, or as earlier builds wrote it), one ZSCORE per form, so that a
   * job-id filter finds the job holding a lock of any number of holders. A job of a queue not inspected, holding a
   * run-time lock past the members read, is not found.
   */
  private async unreadOwner(
    key: string,
    runtime: boolean,
    jobId: string,
    read: readonly RawOwner[],
  ): Promise<RawOwner | undefined> {
    if (read.some((owner) => owner.jobId === jobId)) return undefined;
    if (!runtime) {
      const score = await this.client.zscore(key, jobId);
      return score === null ? undefined : { jobId, leaseExpiresAt: leaseEnd(score) };
    }
    const forms = [
      ...new Set([
        legacyRuntimeLockOwner(jobId),
        ...this.qualifiedNames().flatMap((name) => [
          runtimeLockOwner(jobId, name),
          legacyRuntimeLockOwner(jobId, name),
        ]),
      ]),
    ];
    const scores = await Promise.all(forms.map((member) => this.client.zscore(key, member)));
    const at = scores.findIndex((score) => score !== null);
    return at === -1 ? undefined : { ...parseRuntimeLockOwner(forms[at]), leaseExpiresAt: leaseEnd(scores[at]!) };
  }

  /**
   * Names the queue of each run-time owner that names it by tag: an inspected queue, else one of the library's queue
   * registry (read only then: every queue whose worker guards its jobs is recorded there). A tag neither names keeps
   * its tag and no queue: its job is in none of the inspected queues, and is shown missing.
   */
  private async nameTaggedQueues(owners: RawOwner[]): Promise<void> {
    const tagged = owners.filter((owner) => owner.queueTag !== undefined);
    if (tagged.length === 0) return;
    let names = this.qualifiedNames();
    if (tagged.some((owner) => !names.some((name) => ownerNamesQueue(owner, name)))) {
      names = [...names, ...(await QueueRegistry.read(this.client, this.keys).catch(() => []))];
    }
    for (const owner of tagged) {
      owner.queue = names.find((name) => ownerNamesQueue(owner, name));
      if (owner.queue !== undefined) delete owner.queueTag;
    }
  }

  private qualifiedNames(): string[] {
    return this.queues.map((queue) => bullKeys.qualifiedName(queue.prefix, queue.name));
  }
}

/** The queue of a qualified name (`<prefix>:<name>`; queue names hold no `:`). */
function queueOf(qualifiedName: string): InspectedQueue {
  const at = qualifiedName.lastIndexOf(':');
  return { prefix: qualifiedName.slice(0, Math.max(at, 0)), name: qualifiedName.slice(at + 1) };
}

/**
 * How a sorted-set lock of this storage names its owners: only a run-time lock's members name their queue; an enqueue
 * lock's are job ids, whatever they look like.
 */
function ownerParser(storage: HeldLockStorage): (member: string) => RuntimeLockOwner {
  return storage === 'running' ? parseRuntimeLockOwner : (jobId) => ({ jobId });
}

/** Which kind of lock a key of this storage is. */
export function kindOf(storage: HeldLockStorage): HeldLockKind {
  return storage === 'running' ? 'runtime' : 'enqueue';
}

/** A lease's end from its score, in whole ms (a run-time lock's score carries its take's mark as a fraction). */
function leaseEnd(score: string): number {
  return Math.floor(Number(score));
}
