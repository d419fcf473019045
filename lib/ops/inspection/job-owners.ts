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
    const commands: [string, ...(string | number)[]][] = [
      ['hmget', key(jobId), ...fields],
      ...STATE_PROBES.map(({ suffix, command }): [string, ...(string | number)[]] =>
        command === 'zscore'
          ? ['zscore', key(suffix), jobId]
          : ['lpos', key(suffix), jobId, 'MAXLEN', LIST_PROBE_LENGTH],
      ),
      ...LONG_LISTS.map((suffix): [string, string] => ['llen', key(suffix)]),
    ];
    let replies: unknown[] | undefined;
    try {
      // A queue's keys share one slot (BullMQ requires a hash-tagged prefix on Cluster), so one transaction reads all.
      const answered = await this.client.multi(commands).exec();
      if (answered && answered.every(([error]) => !error)) replies = answered.map(([, value]) => value);
    } catch {
      replies = undefined; // e.g. CROSSSLOT on a Cluster whose BullMQ prefix has no hash tag: read without MULTI
    }
    replies ??= await Promise.all(commands.map(([command, ...args]) => this.client.call(command, ...args)));
    const hash = replies[0] as (string | null)[];
    const found = replies.slice(1, 1 + STATE_PROBES.length);
    const longLists = (replies.slice(1 + STATE_PROBES.length) as number[]).some((length) => length > LIST_PROBE_LENGTH);
    const [name, timestamp, deid, opts, data] = hash;
    if (name === null && timestamp === null) return undefined;
    const stateIndex = found.findIndex((value) => value !== null);
    // In no state set, and not within the probed part of a list longer than the probe: by elimination of BullMQ's
    // other states, waiting.
    const jobState = stateIndex !== -1 ? STATE_PROBES[stateIndex].state : longLists ? 'waiting' : 'unknown';
    return {
      carriesDigest:
        digestOfDeduplicationId(deid ?? undefined) === digest || (opts?.includes(`"digest":"${digest}"`) ?? false),
      owner: {
        jobState,
        ...(name === null ? {} : { jobName: name }),
        ...(timestamp === null || !Number.isFinite(Number(timestamp)) ? {} : { since: Number(timestamp) }),
        ...(withData && typeof data === 'string'
          ? { dataSummary: data.length > DATA_SUMMARY_LENGTH ? `${data.slice(0, DATA_SUMMARY_LENGTH)}…` : data }
          : {}),
      },
    };
  }
}

/**
 * BullMQ's order of precedence for a job's state (its getState script): the first set or list that holds the job id.
 */
const STATE_PROBES: readonly { suffix: string; command: 'zscore' | 'lpos'; state: string }[] = [
  { suffix: 'completed', command: 'zscore', state: 'completed' },
  { suffix: 'failed', command: 'zscore', state: 'failed' },
  { suffix: 'delayed', command: 'zscore', state: 'delayed' },
  { suffix: 'prioritized', command: 'zscore', state: 'prioritized' },
  { suffix: 'active', command: 'lpos', state: 'active' },
  { suffix: 'wait', command: 'lpos', state: 'waiting' },
  { suffix: 'paused', command: 'lpos', state: 'waiting' },
  { suffix: 'waiting-children', command: 'zscore', state: 'waiting-children' },
];

/**
 * How many entries of a list (active, wait, paused) a state probe compares at most. BullMQ's getState walks the whole
 * list (LPOS), which costs one comparison per waiting job: with a million jobs waiting, ~15 ms per owner, so a page of
 * 50 locks took about a second. Past this many, a job found in no state set is taken as waiting (the only state left).
 */
const LIST_PROBE_LENGTH = 10_000;

/** The lists whose length decides whether a job found nowhere may lie past the probe. */
const LONG_LISTS = ['wait', 'paused', 'active'] as const;

/** Whether a job in this state can hold this kind of lock (a run-time lock: running; an enqueue lock: not finished). */
function fitsLock(storage: HeldLockStorage, state: string | undefined): boolean {
  if (storage === 'running') return state === 'active';
  if (storage === 'expiring') return true;
  return state !== 'completed' && state !== 'failed';
}
