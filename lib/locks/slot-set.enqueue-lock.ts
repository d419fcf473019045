import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LockType } from '../interfaces/unique-job-options.interface.js';
import { bullKeys, type UniqueJobsKeys } from '../redis/keys.js';
import { delayOf, type EnqueueLock, type EnqueueRequest, type LockedJob, type Taken } from './enqueue-lock.js';
import type { AcquireResult, LockStore } from './lock-store.js';

/**
 * What the library stores on the options of a job locked in a slot set: the digest, fixed at enqueue. (A job locked by
 * a deduplication key carries its digest in BullMQ's deduplication id, so it needs no marker: every byte of job
 * options costs enqueue throughput.)
 */
export interface UniqueJobMarker {
  digest: string;
}

/** The job options field holding {@link UniqueJobMarker}. */
export const MARKER_FIELD = 'uniqueJobs';

/** The digest a job's marker names, if it has one. */
export function markedDigest(opts: object | undefined): string | undefined {
  const marker = (opts as Record<string, unknown> | undefined)?.[MARKER_FIELD] as UniqueJobMarker | undefined;
  return typeof marker?.digest === 'string' ? marker.digest : undefined;
}

/** What a slot-set lock needs of its job definition. */
export interface SlotSetSettings {
  readonly lock: LockType;
  readonly lockTtl: number | undefined;
  readonly lockLimit: number;
  /** Lease of a slot whose definition sets no `lockTtl` (a queued job renews nothing). */
  readonly defaultLease: number;
  /**
   * Whether a hold may outlive its job or live in another queue (`until_expired`'s period; a lock unique across
   * queues, whose holder this queue cannot see): then a holder missing from this queue is never taken for stale.
   */
  readonly outlivesJob: boolean;
}

/**
 * The enqueue lock as the library's own sorted set `<prefix>:{<digest>}:queued` (`:expiring` for `until_expired`) of
 * holder job ids scored by lease expiry: `lockLimit` holders, locks across queues, and `until_expired` periods that
 * outlive their job. Taken with one script call before the add (two calls per enqueue); a failed add gives it back.
 * A holder whose job is gone from the queue (removed by hand) is dropped when it is met, as BullMQ does with a stale
 * deduplication key, so a duplicate never names a job that no longer exists.
 */
export class SlotSetEnqueueLock implements EnqueueLock {
  constructor(
    private readonly store: LockStore,
    private readonly keys: UniqueJobsKeys,
    private readonly settings: SlotSetSettings,
  ) {}

  async take({ queue, add, name, data, opts, digest, jobId }: EnqueueRequest): Promise<Taken> {
    const marked = { ...opts, jobId, [MARKER_FIELD]: { digest } satisfies UniqueJobMarker };
    // A producer's jobId that a job already has: BullMQ returns that job and adds nothing, so no lock is taken for it.
    const jobKey = bullKeys.job(queue.qualifiedName, jobId);
    if (opts.jobId !== undefined && (await this.store.jobExists(jobKey))) return { job: await add(name, data, marked) };
    const lease = (this.settings.lockTtl ?? this.settings.defaultLease) + delayOf(queue, opts);
    const held = await this.acquire(queue, digest, jobId, lease, false);
    if (!held.acquired) return { existingJobId: held.holder };
    let job: Job;
    try {
      job = await add(name, data, marked);
    } catch (error) {
      await this.store.release(this.key(digest), jobId).catch(() => undefined);
      throw error;
    }
    // The job may have appeared between the check and the add: its slot is this digest's only if it is locked under it.
    if (opts.jobId !== undefined && markedDigest(await this.store.jobOptions(jobKey)) !== digest) {
      await this.store.release(this.key(digest), jobId);
    }
    return { job };
  }

  bulkOptions(): undefined {
    return undefined;
  }

  settleBulk(job: Job): Taken {
    return { job };
  }

  retake({ job, digest }: LockedJob): Promise<AcquireResult> {
    const lease = this.settings.lockTtl ?? this.settings.defaultLease;
    return this.acquire(job.queueQualifiedName, digest, job.id!, lease, true);
  }

  release({ job, digest }: LockedJob): Promise<boolean> {
    return this.store.release(this.key(digest), job.id!);
  }

  releaseAtEnd({ job, digest }: LockedJob, inOrderOn?: Redis): Promise<boolean> {
    return this.store.release(this.key(digest), job.id!, inOrderOn);
  }

  async forget(_queue: Queue, digest: string, holderId: string): Promise<void> {
    await this.store.release(this.key(digest), holderId);
  }

  async holder(queue: Queue, digest: string): Promise<string | undefined> {
    for (let round = 0; round <= this.settings.lockLimit; round++) {
      const holder = await this.store.holder(this.key(digest));
      if (holder === undefined || !(await this.dropIfStale(queue.qualifiedName, digest, holder))) return holder;
    }
    return undefined;
  }

  /** Takes a slot, dropping holders met whose job is gone from the queue (at most `lockLimit` of them). */
  private async acquire(
    queue: Queue | string,
    digest: string,
    owner: string,
    lease: number,
    reentrant: boolean,
  ): Promise<AcquireResult> {
    const qualifiedName = typeof queue === 'string' ? queue : queue.qualifiedName;
    const { lockLimit } = this.settings;
    for (let round = 0; ; round++) {
      const held = await this.store.acquire(this.key(digest), owner, lease, lockLimit, reentrant);
      if (held.acquired || held.holder === undefined || round >= lockLimit) return held;
      if (!(await this.dropIfStale(qualifiedName, digest, held.holder))) return held;
    }
  }

  /**
   * Releases a holder's slot when its job is gone from the queue, or its id now names a job of another digest (a
   * reused job id); `true` when it did.
   */
  private async dropIfStale(qualifiedName: string, digest: string, holder: string): Promise<boolean> {
    if (this.settings.outlivesJob) return false;
    const opts = await this.store.jobOptions(bullKeys.job(qualifiedName, holder));
    if (opts !== undefined && markedDigest(opts) === digest) return false;
    await this.store.release(this.key(digest), holder);
    return true;
  }

  private key(digest: string): string {
    return this.keys.enqueueLock(digest, this.settings.lock);
  }
}
