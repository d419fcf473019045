import type { Job, Queue } from 'bullmq';
import { wholeDelay } from '../common/bullmq-lifecycle.js';
import type { Redis } from 'ioredis';
import type { LockType } from '../interfaces/unique-job-options.interface.js';
import { bullKeys, type UniqueJobsKeys } from '../redis/keys.js';
import {
  delayOf,
  type EnqueueLock,
  type EnqueueRequest,
  type LockedJob,
  type Prepared,
  type RemovableHold,
  type Taken,
} from './enqueue-lock.js';
import { BulksInProgress } from './bulks-in-progress.js';
import type { SoonerEnd } from './lock-marks.js';
import type { AcquireResult, LockStore } from './lock-store.js';
import { MARKER_FIELD, markedDigest, type UniqueJobMarker } from './job-marker.js';

/** How long a slot is given for its job to be added before a holder whose job is missing counts as stale. */
const STALE_GRACE_MS = 15_000;

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
  /** Requests whose `prepare` took a slot (a request answered by an existing job took none, and gives none back). */
  private readonly took = new WeakSet<EnqueueRequest>();
  private readonly bulks: BulksInProgress;
  readonly takenBeforeAdd: boolean;
  readonly leaseBeforeAdd: number;

  constructor(
    private readonly store: LockStore,
    private readonly keys: UniqueJobsKeys,
    private readonly settings: SlotSetSettings,
  ) {
    this.bulks = new BulksInProgress(store, keys);
    // An `until_expired` hold outlives its job by design: neither the reaper (its `:expiring` key is not its to judge)
    // nor a producer takes it for an orphan, so a bulk of them has nothing to announce.
    this.takenBeforeAdd = settings.lock !== 'until_expired';
    this.leaseBeforeAdd = settings.lockTtl ?? settings.defaultLease;
  }

  async prepare(request: EnqueueRequest): Promise<Prepared> {
    const { queue, opts, jobId } = request;
    // A producer's jobId that a job already has (or that an earlier entry of the bulk adds): BullMQ returns that job
    // and adds nothing, so no lock is taken for it.
    if (
      opts.jobId !== undefined &&
      (request.addedBefore || (await this.store.jobs.exists(bullKeys.job(queue.qualifiedName, jobId))))
    ) {
      return { opts: this.marked(request) };
    }
    return this.take(request);
  }

  /**
   * An entry of a bulk with a job id of the library's sends its slot's acquire now (a producer's jobId is first
   * checked against the queue: it waits for its turn); whatever the answer asks next (a stale holder to drop) waits
   * for the entries before it.
   */
  begin(request: EnqueueRequest): (() => Promise<Prepared>) | undefined {
    if (request.opts.jobId !== undefined) return undefined;
    const first = this.store.acquireSlot(
      this.key(request.digest),
      request.jobId,
      this.leaseOf(request),
      this.settings.lockLimit,
      false,
    );
    first.catch(() => undefined); // awaited in turn by the bulk: not an unhandled rejection meanwhile
    return () => this.take(request, first);
  }

  /** Takes the request's slot (`first`: the answer of an acquire already sent for it), or names the holder. */
  private async take(request: EnqueueRequest, first?: Promise<AcquireResult>): Promise<Prepared> {
    const { queue, opts, digest, jobId } = request;
    const lease = this.leaseOf(request);
    let held = await this.acquire(queue, digest, jobId, lease, false, first);
    if (!held.acquired && opts.jobId !== undefined && held.holder === jobId && !this.settings.outlivesJob) {
      // The producer's jobId holds a slot, but no job has that id (checked above): its job is gone (removed behind the
      // library's back), or another producer is adding the same jobId right now, which BullMQ makes one job. Either
      // way the slot is this add's: never a duplicate of a job that does not exist. (A hold that outlives its job,
      // an until_expired period or a lock across queues, stays its own: the same id is refused until it ends.)
      held = await this.acquire(queue, digest, jobId, lease, 'new');
    }
    if (held.acquired) this.took.add(request);
    return held.acquired ? { opts: this.marked(request) } : { existingJobId: held.holder };
  }

  /** A new job's options: its id, its digest's marker, no deduplication (a queue default's would drop it). */
  private marked({ opts, jobId, digest }: EnqueueRequest): EnqueueRequest['opts'] {
    const marker: UniqueJobMarker = { digest };
    return { ...opts, jobId, deduplication: undefined, [MARKER_FIELD]: marker } as typeof opts;
  }

  /** A new job's lease: the lock's lifetime from its run time. */
  private leaseOf({ queue, opts }: EnqueueRequest): number {
    return this.leaseBeforeAdd + delayOf(queue, opts);
  }

  async settle(job: Job<unknown, unknown>, request: EnqueueRequest): Promise<Taken> {
    const { queue, opts, digest, jobId } = request;
    if (opts.jobId === undefined) {
      // BullMQ answered an id of the library's with something else: an error code of its add (in an addBulk, e.g. a
      // missing parent), the job not added. Its slot is given back.
      if (job.id !== jobId) await this.store.release(this.key(digest), jobId);
      return { job };
    }
    // An add answered by a job that already had the producer's jobId took no slot (a hold of that id, e.g. an
    // until_expired period, is not this add's to release). Such a job may have appeared between the check and the add:
    // the slot this add took is this digest's only if that job is locked under it.
    if (!this.took.has(request)) return { job, existed: true };
    if (markedDigest(await this.store.jobs.options(bullKeys.job(queue.qualifiedName, jobId))) === digest)
      return { job };
    await this.store.release(this.key(digest), jobId);
    return { job, existed: true };
  }

  /**
   * Gives back the slot `prepare` took, for a job whose add failed, or may have failed in part (BullMQ's `addBulk` is a
   * pipeline: entries before and after a failing one are added). A slot whose job is in the queue, marked with this
   * digest, is kept: that add went through. A request with a job id of the library's (unique) is released even if its
   * acquire's answer was lost; a producer's `jobId` only when this request took the slot (else the slot is another
   * job's with that id, e.g. an `until_expired` period).
   */
  async abandon(request: EnqueueRequest): Promise<void> {
    const { queue, opts, digest, jobId } = request;
    if (opts.jobId !== undefined && !this.took.has(request)) return;
    try {
      const stored = await this.store.jobs.options(bullKeys.job(queue.qualifiedName, jobId));
      if (markedDigest(stored) === digest) return;
      await this.store.release(this.key(digest), jobId);
    } catch {
      // Redis unreachable: the slot's lease ends it, or the holder is found stale when met.
    }
  }

  async retake({ job, digest }: LockedJob, whileLive = false): Promise<AcquireResult> {
    // An until_expired period outlives its job: it is taken whatever the job became. Else (a lock across queues too:
    // the job's own queue is known here) nothing is taken for a job BullMQ finished meanwhile (see
    // EnqueueLock.retake). The check is a read before the script and one after it (the lock and the job live in
    // different slots on a Cluster): a job removed or finished by the second read gives back the slot it took, by its
    // mark (a job re-added with the same id meanwhile keeps its own; one another worker started running meanwhile
    // keeps it too). A job removed after the second read, by a removal that read its slot before the take, keeps the
    // slot until its lease ends or the reaper finds it gone.
    const checked = whileLive && this.settings.lock !== 'until_expired';
    if (checked && !(await this.store.jobs.live(job.queueQualifiedName, job.id!, job.token))) return { acquired: true };
    const held = await this.acquire(job.queueQualifiedName, digest, job.id!, this.leaseBeforeAdd, 'keep');
    // Not for a lock across queues: its slot names a bare job id that a live job of another queue may hold (as a
    // guarded removal leaves such a slot to the reaper, see holdOf).
    if (checked && !this.settings.outlivesJob && held.acquired && held.mark !== undefined && held.mark !== '0') {
      const jobKey = bullKeys.job(job.queueQualifiedName, job.id!);
      if ((await this.store.jobs.standing(jobKey)) !== 'live') {
        await this.store.releaseMarked(this.key(digest), job.id!, held.mark);
      }
    }
    return held;
  }

  release({ job, digest }: LockedJob): Promise<boolean> {
    return this.store.release(this.key(digest), job.id!);
  }

  /**
   * With the attempt's token, sent on the worker's connection known to reach the slot's server (`inOrderOn`), only while
   * the worker still holds the job's BullMQ lock (not on a Cluster: see {@link LockStore.releaseAttemptSlot}): a worker
   * that stalled past it leaves the slot to the job's new run, which holds it under the same id. Else one `ZREM`: the
   * library's connection may reach another server than BullMQ's (a `forRoot` connection given so), which has no job lock.
   */
  releaseAtEnd({ job, digest }: LockedJob, inOrderOn?: Redis, token?: string): Promise<boolean> {
    if (token === undefined || inOrderOn === undefined) return this.store.release(this.key(digest), job.id!, inOrderOn);
    const jobLock = bullKeys.jobLock(job.queueQualifiedName, job.id!);
    return this.store.releaseAttemptSlot(this.key(digest), jobLock, job.id!, token, inOrderOn);
  }

  /**
   * Always: every slot has a lease (`lockTtl`, else the default lease), which a queued job does not renew. A job whose
   * slot was taken under earlier options (a `lockTtl` removed since) holds it only that long: moved later (a long
   * retry backoff), its lease moves to this definition's lease past the new run time, as a guarded `changeDelay` does.
   */
  endsAtTtl(): boolean {
    return true;
  }

  async retime({ job, digest }: LockedJob, runInMs: number, sooner: SoonerEnd = 'never'): Promise<void> {
    await this.store.retime(this.key(digest), job.id!, this.leaseBeforeAdd + wholeDelay(runInMs), sooner); // a held slot
  }

  async soonerEndOf({ job, digest }: LockedJob): Promise<SoonerEnd> {
    const leaseRead = await this.store.leaseOf(this.key(digest), job.id!);
    return leaseRead === undefined ? 'never' : { leaseRead };
  }

  async forget(_queue: Queue, digest: string, holderId: string): Promise<void> {
    await this.store.release(this.key(digest), holderId);
  }

  get releasesOnRemoval(): boolean {
    return !this.settings.outlivesJob;
  }

  async holdOf(digest: string, jobId: string): Promise<RemovableHold | undefined> {
    if (this.settings.outlivesJob) return undefined;
    const key = this.key(digest);
    const lease = await this.store.leaseOf(key, jobId);
    return lease === undefined ? undefined : { release: () => this.store.releaseHold(key, jobId, lease) };
  }

  async holder(queue: Queue, digest: string): Promise<string | undefined> {
    for (let round = 0; round <= this.settings.lockLimit; round++) {
      const found = await this.store.holder(this.key(digest));
      if (!found || !(await this.dropIfStale(queue.qualifiedName, digest, found.holder, found.leftMs))) {
        return found?.holder;
      }
    }
    return undefined;
  }

  async holders(queue: Queue, digest: string): Promise<string[]> {
    const found = await this.store.holders(this.key(digest), this.settings.lockLimit);
    const live: string[] = [];
    for (const { holder, leftMs } of found) {
      if (!(await this.dropIfStale(queue.qualifiedName, digest, holder, leftMs))) live.push(holder);
    }
    return live;
  }

  /**
   * Takes a slot, dropping holders met whose job is gone from the queue (at most `lockLimit` of them). `first`: the
   * answer of the first acquire, sent already. `reentrant`: see `LockStore.acquireSlot`.
   */
  private async acquire(
    queue: Queue | string,
    digest: string,
    owner: string,
    lease: number,
    reentrant: 'keep' | 'new' | false,
    first?: Promise<AcquireResult>,
  ): Promise<AcquireResult> {
    const qualifiedName = typeof queue === 'string' ? queue : queue.qualifiedName;
    const { lockLimit } = this.settings;
    for (let round = 0; ; round++) {
      const held = await ((round === 0 ? first : undefined) ??
        this.store.acquireSlot(this.key(digest), owner, lease, lockLimit, reentrant));
      if (held.acquired || held.holder === undefined || round >= lockLimit) return held;
      if (!(await this.dropIfStale(qualifiedName, digest, held.holder, held.retryAfter))) return held;
    }
  }

  /**
   * Releases a holder's slot when its job is gone from the queue, or its id now names a job of another digest (a
   * reused job id); `true` when it did. A slot taken less than {@link STALE_GRACE_MS} ago (by its lease left: a
   * delayed job's lease is longer, so it only looks younger) is never stale: its job may be about to be added. Nor is
   * one while a large `addBulk` that began before it was taken is in progress ({@link BulksInProgress}): such a bulk
   * adds its jobs after all of its locks.
   */
  private async dropIfStale(qualifiedName: string, digest: string, holder: string, leftMs: number): Promise<boolean> {
    if (this.settings.outlivesJob) return false;
    if (leftMs > this.leaseBeforeAdd - STALE_GRACE_MS) return false;
    const jobKey = bullKeys.job(qualifiedName, holder);
    const isItsJob = (opts: Record<string, unknown> | undefined) => opts !== undefined && markedDigest(opts) === digest;
    if (isItsJob(await this.store.jobs.options(jobKey))) return false;
    // A bulk that began before the slot was taken may be about to add its job (one that began since did not take it).
    if (await this.bulks.mayHold(leftMs)) return false;
    // Read again: a bulk that added the job and ended its announcement between the two reads above is seen now (a
    // bulk holding the slot announced itself before taking it, so no announcement left means its job was added).
    if (isItsJob(await this.store.jobs.options(jobKey))) return false;
    await this.store.release(this.key(digest), holder);
    return true;
  }

  private key(digest: string): string {
    return this.keys.enqueueLock(digest, this.settings.lock);
  }
}
