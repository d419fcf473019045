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
}

/**
 * The enqueue lock as the library's own sorted set `<prefix>:{<digest>}:queued` (`:expiring` for `until_expired`) of
 * holder job ids scored by lease expiry: `lockLimit` holders, locks across queues, and `until_expired` periods that
 * outlive their job. Taken with one script call before the add (two calls per enqueue); a failed add gives it back.
 */
export class SlotSetEnqueueLock implements EnqueueLock {
  constructor(
    private readonly store: LockStore,
    private readonly keys: UniqueJobsKeys,
    private readonly settings: SlotSetSettings,
  ) {}

  async take({ queue, add, name, data, opts, digest, jobId }: EnqueueRequest): Promise<Taken> {
    const key = this.key(digest);
    const lease = (this.settings.lockTtl ?? this.settings.defaultLease) + delayOf(queue, opts);
    const held = await this.store.acquire(key, jobId, lease, this.settings.lockLimit);
    if (!held.acquired) return { existingJobId: held.holder };
    let job: Job;
    try {
      const marker: UniqueJobMarker = { digest };
      job = await add(name, data, { ...opts, jobId, [MARKER_FIELD]: marker } as typeof opts);
    } catch (error) {
      await this.store.release(key, jobId).catch(() => undefined);
      throw error;
    }
    // A producer's jobId that a job already has: BullMQ returns that job and adds nothing. Its slot is only this
    // digest's if that job was locked under it.
    if (opts.jobId !== undefined) {
      const stored = await this.store.jobOptions(bullKeys.job(queue.qualifiedName, jobId));
      if (markedDigest(stored) !== digest) await this.store.release(key, jobId);
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
    const { lockTtl, defaultLease, lockLimit } = this.settings;
    return this.store.acquire(this.key(digest), job.id!, lockTtl ?? defaultLease, lockLimit);
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

  holder(_queue: Queue, digest: string): Promise<string | undefined> {
    return this.store.holder(this.key(digest));
  }

  private key(digest: string): string {
    return this.keys.enqueueLock(digest, this.settings.lock);
  }
}
