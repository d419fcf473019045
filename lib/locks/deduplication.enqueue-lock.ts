import type { Job, Queue } from 'bullmq';
import { wholeDelay } from '../common/bullmq-lifecycle.js';
import type { Redis } from 'ioredis';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import { bullKeys, deduplicationId } from '../redis/keys.js';
import { ContendedDigests } from './contended-digests.js';
import {
  delayOf,
  isAddErrorCode,
  type EnqueueLock,
  type EnqueueRequest,
  type LockedJob,
  type Prepared,
  type Taken,
} from './enqueue-lock.js';
import type { SoonerEnd } from './lock-marks.js';
import type { AcquireResult, LockStore } from './lock-store.js';
import { MARKER_FIELD } from './job-marker.js';

/**
 * The enqueue lock as BullMQ's own deduplication key (`<queue>:de:uj:<digest>`, value = the holder's job id): taken
 * inside BullMQ's add script, so a unique enqueue costs one Redis call, and deleted by BullMQ when the job completes,
 * finally fails or is removed. With `lockTtl` the key also gets that TTL (plus the job's delay), and the library
 * releases it itself when the job ends.
 */
export class DeduplicationEnqueueLock implements EnqueueLock {
  /** Keys recently found held: their duplicates are answered by a read, not a whole add. */
  private readonly contended = new ContendedDigests();
  /** Adds with a producer's `jobId`: whether a job had that id just before the add (asked ahead of it). */
  private readonly existedBefore = new WeakMap<EnqueueRequest, Promise<boolean>>();

  constructor(
    private readonly store: LockStore,
    private readonly lockTtl: number | undefined,
  ) {}

  async prepare(request: EnqueueRequest): Promise<Prepared> {
    const { queue, opts, digest, jobId } = request;
    if (opts.parent) {
      throw new UniqueJobsError(
        `Job "${request.name}" on queue "${queue.name}" has a "parent", but its enqueue lock is BullMQ's deduplication key, which BullMQ refuses on a child job: add the unique job from the parent's handler (without "parent"), or give it a definition on the slot-set path (lockLimit > 1 or uniqueAcross: 'queues')`,
      );
    }
    const key = bullKeys.deduplication(queue.qualifiedName, digest);
    if (opts.jobId === undefined && this.contended.has(key)) {
      const holder = await this.store.deduplication.peek(key, bullKeys.queueKeyPrefix(queue.qualifiedName));
      if (holder !== undefined) return { existingJobId: holder };
      this.contended.delete(key);
    }
    // BullMQ answers an existing jobId with that job before any deduplication (the add takes no lock), and with the same
    // id as a job it adds: asked on the queue's connection ahead of the add, so answered as of just before it (no round
    // trip of its own), when someone listens for it (`reported`). An earlier entry of the bulk adding that id makes it
    // exist by then.
    if (opts.jobId !== undefined && !request.addedBefore && request.reported) {
      const client = await queue.getBackend().client;
      const asked = client.hexists(bullKeys.job(queue.qualifiedName, jobId), 'name').then((found) => found === 1);
      asked.catch(() => undefined); // awaited by settle: not an unhandled rejection meanwhile
      this.existedBefore.set(request, asked);
    }
    const ttl = this.lockTtl;
    if (ttl === undefined) return { opts: { ...opts, jobId, deduplication: { id: deduplicationId(digest) } } };
    const runIn = delayOf(queue, opts);
    // A caller's `timestamp` moved the run time: the key's TTL less the job's delay is not `lockTtl`, which the job then
    // carries, for a build without `lockTtl` to move its lock by ({@link addedLockTtl}).
    const moved = runIn !== delayOf(queue, { ...opts, timestamp: undefined });
    const carried: AddedLockTtl | undefined = moved ? { lockTtl: ttl } : undefined;
    return {
      opts: {
        ...opts,
        jobId,
        deduplication: { id: deduplicationId(digest), ttl: ttl + runIn },
        ...(carried ? { [MARKER_FIELD]: carried } : {}),
      },
    };
  }

  /**
   * A new job's lock is taken inside BullMQ's add: readying it at most reads who holds the key, so it starts at once,
   * and the reads of a bulk's contended entries share one call.
   */
  begin(request: EnqueueRequest): () => Promise<Prepared> {
    const prepared = this.prepare(request);
    prepared.catch(() => undefined); // awaited in turn by the bulk: not an unhandled rejection meanwhile
    return () => prepared;
  }

  /**
   * BullMQ answers a deduplicated add with the existing job's id instead of the one chosen, and an add whose producer
   * `jobId` names a job already with that job (nothing added, no lock taken).
   */
  async settle(job: Job<unknown, unknown>, request: EnqueueRequest): Promise<Taken> {
    const { queue, digest, jobId } = request;
    if (job.id === jobId && request.opts.jobId !== undefined) {
      const existed = request.addedBefore || (await this.existedBefore.get(request)?.catch(() => false));
      return existed ? { job, existed } : { job };
    }
    if (job.id === jobId || isAddErrorCode(job.id)) return { job };
    this.contended.add(bullKeys.deduplication(queue.qualifiedName, digest));
    return { existingJobId: job.id };
  }

  async abandon(): Promise<void> {
    // Nothing was taken: the lock rides inside the add that failed.
  }

  async retake({ job, digest }: LockedJob, whileLive = false): Promise<AcquireResult> {
    const key = bullKeys.deduplication(job.queueQualifiedName, digest);
    const prefix = bullKeys.queueKeyPrefix(job.queueQualifiedName);
    const live = whileLive ? { token: job.token } : undefined;
    const answer = await this.store.deduplication.relock(key, job.id!, this.lockTtl, prefix, live);
    if (answer !== 'other') return { acquired: true };
    return { acquired: false, holder: await this.store.deduplication.peek(key, prefix), retryAfter: 0 };
  }

  release({ job }: LockedJob): Promise<boolean> {
    return job.removeDeduplicationKey();
  }

  async releaseAtEnd(locked: LockedJob, inOrderOn?: Redis, token?: string): Promise<boolean | 'with-job'> {
    // Without a TTL BullMQ deletes the key in the script that moves the job to completed or failed, which it refuses
    // to a worker that no longer holds the job's lock. With one, the release goes ahead of BullMQ's record of the end,
    // on the worker's connection, with the same condition when the attempt's token is known.
    // A job added with a TTL (a `lockTtl` removed since) is released by the library: BullMQ deletes only keys without.
    if (this.lockTtl === undefined && !addedWithTtl(locked.job)) return 'with-job';
    if (token === undefined) return this.release(locked);
    const { job, digest } = locked;
    const key = bullKeys.deduplication(job.queueQualifiedName, digest);
    const jobLock = bullKeys.jobLock(job.queueQualifiedName, job.id!);
    return this.store.deduplication.release(key, jobLock, job.id!, token, inOrderOn);
  }

  endsAtTtl(job: Job<unknown, unknown>): boolean {
    return this.lockTtl !== undefined || addedWithTtl(job);
  }

  async retime({ job, digest }: LockedJob, runInMs: number, sooner: SoonerEnd = 'never'): Promise<void> {
    // A job added with a TTL (a `lockTtl` removed since) keeps its lock that long past its new run time, as it would have.
    const ttl = this.lockTtl ?? addedLockTtl(job);
    if (ttl === undefined) return; // no TTL: the lock lives as long as its job
    const key = bullKeys.deduplication(job.queueQualifiedName, digest);
    const jobKey = bullKeys.job(job.queueQualifiedName, job.id!);
    await this.store.deduplication.retime(key, jobKey, job.id!, ttl + wholeDelay(runInMs), sooner);
  }

  /** The key's value is the job id, the same for a job added again with it: its hash's timestamp tells them apart. */
  soonerEndOf({ job }: LockedJob): Promise<SoonerEnd> {
    return Promise.resolve({ addedAt: job.timestamp });
  }

  async forget(): Promise<void> {
    // BullMQ deletes the key with the job it belongs to.
  }

  /** BullMQ deletes the key with the job it belongs to. */
  readonly takenBeforeAdd = false;
  readonly releasesOnRemoval = false;

  holdOf(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  holder(queue: Queue, digest: string): Promise<string | undefined> {
    return this.store.deduplication.peek(
      bullKeys.deduplication(queue.qualifiedName, digest),
      bullKeys.queueKeyPrefix(queue.qualifiedName),
    );
  }

  async holders(queue: Queue, digest: string): Promise<string[]> {
    const holder = await this.holder(queue, digest);
    return holder === undefined ? [] : [holder];
  }
}

/** Whether BullMQ added the job with a deduplication TTL (its options as stored): its key outlives the job. */
function addedWithTtl(job: Pick<Job, 'opts'>): boolean {
  const ttl = job.opts.deduplication?.ttl;
  return typeof ttl === 'number' && ttl > 0;
}

/**
 * What a job whose run time a caller's `timestamp` moved carries in the library's options field: the `lockTtl` it was
 * added with, which its deduplication TTL (counted from the add) does not tell.
 */
interface AddedLockTtl {
  lockTtl: number;
}

/**
 * The `lockTtl` a job was added with: the one it carries, else its deduplication TTL less the delay it was added with
 * (at least 1 ms). A job added by an earlier build with a caller's `timestamp` and a delay carries none: its TTL also
 * counted the time from its add to that timestamp, which nothing BullMQ stores tells.
 */
function addedLockTtl(job: Pick<Job, 'opts'>): number | undefined {
  if (!addedWithTtl(job)) return undefined;
  const carried = (job.opts as Record<string, unknown>)[MARKER_FIELD] as Partial<AddedLockTtl> | undefined;
  if (typeof carried?.lockTtl === 'number') return carried.lockTtl;
  const delay = job.opts.delay;
  return Math.max(1, job.opts.deduplication!.ttl! - (typeof delay === 'number' && delay > 0 ? delay : 0));
}
