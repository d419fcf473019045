import type { Cluster, Redis } from 'ioredis';
import { bullKeys, digestOfDeduplicationId } from '../../redis/keys.js';
import type { HeldLockStorage, InspectedQueue, LockOwner } from './lock-inspection.interface.js';

/** Characters of job data in {@link LockOwner.dataSummary}. */
const DATA_SUMMARY_LENGTH = 200;

/** A key SCAN found that may hold a lock. */
export interface Candidate {
  key: string;
  digest: string;
  storage: HeldLockStorage;
  /** The queue of a deduplication key. */
  queue?: InspectedQueue;
}

/** Reads the jobs that own a lock: which queue each lives in, its state, name, age and (optionally) data. */
export class JobOwners {
  constructor(private readonly client: Redis | Cluster) {}

  /**
   * Finds an owner's job in the queues with its state, name and creation time. A sorted-set lock names its owners by
   * job id only, and ids repeat across queues (BullMQ numbers each queue's jobs from 1), so when several queues have a
   * job with that id the best match wins: a job that carries this digest (its deduplication id or the library's
   * marker), then one whose state fits the lock (active for a run-time lock, not finished for an enqueue lock), then the
   * first queue by name.
   */
  async resolve(
    owner: { jobId: string; leaseExpiresAt?: number },
    candidate: Candidate,
    queues: readonly InspectedQueue[],
    withData: boolean,
  ): Promise<LockOwner> {
    const found = await Promise.all(
      queues.map((queue) => this.readJob(queue, owner.jobId, candidate.digest, withData)),
    );
    let best = -1;
    let bestRank = 0;
    found.forEach((job, index) => {
      if (!job) return;
      const rank = (job.carriesDigest ? 4 : 0) + (fitsLock(candidate.storage, job.owner.jobState) ? 2 : 0) + 1;
      if (rank > bestRank) [best, bestRank] = [index, rank];
    });
    if (best === -1) return { ...owner, jobState: 'missing' };
    return { ...owner, queue: queues[best].name, ...found[best]!.owner };
  }

  /**
   * A job's name, creation time, state (as BullMQ's getState computes it) and data summary, read atomically, and
   * whether it carries `digest`.
   */
  private async readJob(
    queue: InspectedQueue,
    jobId: string,
    digest: string,
    withData: boolean,
  ): Promise<{ owner: Omit<LockOwner, 'jobId'>; carriesDigest: boolean } | undefined> {
    const qualified = bullKeys.qualifiedName(queue.prefix, queue.name);
    const key = (suffix: string) => bullKeys.queueKey(qualified, suffix);
    const fields = ['name', 'timestamp', 'deid', 'opts', ...(withData ? ['data'] : [])];
    // BullMQ's order of precedence (getState): completed, failed, delayed, prioritized, active, wait, paused, children.
    const probes: [string, 'zscore' | 'lpos'][] = [
      ['completed', 'zscore'],
      ['failed', 'zscore'],
      ['delayed', 'zscore'],
      ['prioritized', 'zscore'],
      ['active', 'lpos'],
      ['wait', 'lpos'],
      ['paused', 'lpos'],
      ['waiting-children', 'zscore'],
    ];
    const states = [
      'completed',
      'failed',
      'delayed',
      'prioritized',
      'active',
      'waiting',
      'waiting',
      'waiting-children',
    ];
    const direct = async (): Promise<unknown[]> =>
      Promise.all([
        this.client.hmget(key(jobId), ...fields),
        ...probes.map(([suffix, command]) =>
          command === 'zscore' ? this.client.zscore(key(suffix), jobId) : this.client.lpos(key(suffix), jobId),
        ),
      ]);
    let replies: unknown[] | undefined;
    try {
      // A queue's keys share one slot (BullMQ requires a hash-tagged prefix on Cluster), so one transaction reads all.
      const multi = this.client.multi().hmget(key(jobId), ...fields);
      for (const [suffix, command] of probes) {
        if (command === 'zscore') multi.zscore(key(suffix), jobId);
        else multi.lpos(key(suffix), jobId);
      }
      const answered = await multi.exec();
      if (answered && answered.every(([error]) => !error)) replies = answered.map(([, value]) => value);
    } catch {
      replies = undefined; // e.g. CROSSSLOT on a Cluster whose BullMQ prefix has no hash tag: read without MULTI
    }
    const [hash, ...found] = (replies ?? (await direct())) as [(string | null)[], ...unknown[]];
    const [name, timestamp, deid, opts, data] = hash;
    if (name === null && timestamp === null) return undefined;
    const stateIndex = found.findIndex((value) => value !== null);
    return {
      carriesDigest:
        digestOfDeduplicationId(deid ?? undefined) === digest || (opts?.includes(`"digest":"${digest}"`) ?? false),
      owner: {
        jobState: stateIndex === -1 ? 'unknown' : states[stateIndex],
        ...(name === null ? {} : { jobName: name }),
        ...(timestamp === null || !Number.isFinite(Number(timestamp)) ? {} : { since: Number(timestamp) }),
        ...(withData && typeof data === 'string'
          ? { dataSummary: data.length > DATA_SUMMARY_LENGTH ? `${data.slice(0, DATA_SUMMARY_LENGTH)}…` : data }
          : {}),
      },
    };
  }
}

/** Whether a job in this state can hold this kind of lock (a run-time lock: running; an enqueue lock: not finished). */
function fitsLock(storage: HeldLockStorage, state: string | undefined): boolean {
  if (storage === 'running') return state === 'active';
  if (storage === 'expiring') return true;
  return state !== 'completed' && state !== 'failed';
}
