import type { Job, JobsOptions, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { SoonerEnd } from './lock-marks.js';
import type { AcquireResult } from './lock-store.js';
import { wholeDelay } from '../common/bullmq-lifecycle.js';

/** A queue's own `add`, which the library's guard replaces (the enqueue lock adds through it). */
export type AddFn = (name: string, data: unknown, opts?: JobsOptions) => Promise<Job<unknown, unknown>>;

/** A new job to lock and add. */
export interface EnqueueRequest {
  readonly queue: Queue;
  readonly name: string;
  readonly data: unknown;
  /** The producer's options (without the library's). */
  readonly opts: JobsOptions;
  readonly digest: string;
  /** The id the job gets: the producer's `jobId`, or one of the library's. */
  readonly jobId: string;
  /**
   * An earlier entry of the same bulk adds a job with this producer `jobId`: BullMQ adds one job, which this entry is
   * (as a second `queue.add` with an id that exists is), so no lock is taken for it.
   */
  readonly addedBefore?: boolean;
  /**
   * Someone listens for the `locked` event: only then does the deduplication path ask, ahead of an add with a producer
   * `jobId`, whether that job exists already (an add it answers took no lock, and is not reported). Unasked, such an
   * add costs its one command, and no `locked` event is reported for it (a subscriber that comes while it is on its
   * way could be told of a lock it did not take).
   */
  readonly reported?: boolean;
}

/**
 * What taking the lock for a new job did: added the job, or met the job holding the lock. `existed`: the add was
 * answered by a job that already had the producer's `jobId` (BullMQ returns it and adds nothing): no lock was taken.
 */
export type Taken = { job: Job<unknown, unknown>; existed?: true } | { existingJobId: string | undefined };

/** A new job ready to be added (its options take or carry its lock), or the job that holds the lock. */
export type Prepared = { opts: JobsOptions } | { existingJobId: string | undefined };

/** A job that holds (or held, or is to hold again) its enqueue lock. */
export interface LockedJob {
  readonly job: Job<unknown, unknown>;
  readonly digest: string;
}

/**
 * The enqueue lock of a job definition: what keeps a second job of a digest out of the queue. Chosen once per
 * definition: BullMQ's deduplication key (one Redis call per enqueue; the lock lives and dies with the job) or the
 * library's own slot set (`lockLimit` > 1, unique across queues, `until_expired`). Every release is compare-and-delete
 * on the job id.
 */
export interface EnqueueLock {
  /**
   * Readies a new job: the options it is added with (they take the lock inside BullMQ's add, or carry the slot taken
   * now), or the job already holding the lock (nothing taken). Then the job is added — alone, or with others in one
   * `addBulk` — and {@link settle} says what the add did; if the add fails, {@link abandon} gives back what was taken.
   */
  prepare(request: EnqueueRequest): Promise<Prepared>;
  /**
   * Starts readying an entry of a bulk now, as {@link prepare} would: what it sends first goes out before anything
   * the next entry's `begin` sends, so the entries of one bulk meet the lock in their order while their first calls
   * share a round trip. Answers the rest of the readying, which the bulk awaits in entry order (each once the one before
   * it finished); `undefined` when the entry cannot start before the ones before it finished (the bulk then calls
   * {@link prepare} for it in turn).
   */
  begin(request: EnqueueRequest): (() => Promise<Prepared>) | undefined;
  /** What the add of a prepared job did: added it, or (BullMQ's own answer) met the job holding the lock. */
  settle(job: Job<unknown, unknown>, request: EnqueueRequest): Promise<Taken>;
  /** Gives back what {@link prepare} took, for a job whose add failed. */
  abandon(request: EnqueueRequest): Promise<void>;
  /**
   * Takes the lock (back) for a job that exists, unless another live job holds it; re-entrant for its holder.
   * `whileLive` (a worker re-taking the lock of a job it ran): nothing is taken once BullMQ has finished the job or it
   * is gone, which is answered as admitted (there is nothing to refuse).
   */
  retake(locked: LockedJob, whileLive?: boolean): Promise<AcquireResult>;
  /** Releases the job's hold now; `false` when it held none. */
  release(locked: LockedJob): Promise<boolean>;
  /**
   * Releases the job's hold at its end: after its handler returned (BullMQ records it completed next), or after BullMQ
   * recorded it failed for good. `'with-job'`: BullMQ deletes the lock itself, in the script that records the end
   * (nothing is sent). `inOrderOn`: the worker's connection, known to reach the lock's server, to send the release on
   * (it lands before BullMQ's record of the end, sent next on it; the caller may not wait for its answer). `token`:
   * released by the attempt that ran the job, before BullMQ records its end: a lock that can tell (the deduplication
   * key, in the job's slot; a slot set sent on `inOrderOn`) releases only while the job's BullMQ lock holds this token,
   * so a worker that stalled past it (the job recovered elsewhere) leaves the lock to the job's new run.
   */
  releaseAtEnd(locked: LockedJob, inOrderOn?: Redis, token?: string): Promise<boolean | 'with-job'>;
  /**
   * Whether the job's hold ends at a time of its own (a `lockTtl`, or a TTL the job was added with under earlier
   * options) rather than with the job: a move of its run time must move that end too ({@link retime}).
   */
  endsAtTtl(job: Job<unknown, unknown>): boolean;
  /**
   * The job's run time moved (a retry's backoff, a handler's move, `changeDelay`, `promote`): a lock that lives
   * `lockTtl` past the run time follows it. `runInMs`: how far the run time now is. `sooner`: whether the hold may end
   * sooner than it ends now ({@link SoonerEnd}; `'never'` unless told).
   */
  retime(locked: LockedJob, runInMs: number, sooner?: SoonerEnd): Promise<void>;
  /**
   * Read before a move of the job's run time: what the move's {@link retime} may do to a hold it would end sooner (a
   * slot's lease as read: its mark tells the slot from one a job added again with the same id takes meanwhile; the
   * job's timestamp, for a deduplication key).
   */
  soonerEndOf(locked: LockedJob): Promise<SoonerEnd>;
  /** Forgets a holder that was removed from the queue (its hold would otherwise outlive it). */
  forget(queue: Queue, digest: string, holderId: string): Promise<void>;
  /**
   * Whether the lock is taken by a call of its own before the job's add (the slot set), not inside BullMQ's add, and a
   * holder whose job is missing can be taken for an orphan (not an `until_expired` hold, which outlives its job): until
   * the add, a holder whose job does not exist yet holds it. A large bulk of such entries announces itself.
   */
  readonly takenBeforeAdd: boolean;
  /**
   * The shortest lease a lock {@link takenBeforeAdd} is taken with by these options (its lease before any delay): a
   * large bulk announces it, so that a slot's age is read from its lease left by the options of the producer that
   * took it, not the reader's (see `BulksInProgress`).
   */
  readonly leaseBeforeAdd?: number;
  /** Whether {@link holdOf} can answer a hold: whether a job removed by hand would leave a hold behind it. */
  readonly releasesOnRemoval: boolean;
  /**
   * The hold a job has now, read before the job is removed by hand (`job.remove()` through a guarded queue), to give
   * back once BullMQ removed it: a slot's lease, released only if the job id still holds that very lease (a hold taken
   * again meanwhile, by a new job with the same id, is left alone). `undefined` when there is nothing to give back: the
   * job holds nothing, or the lock is a deduplication key (BullMQ deletes it with the job), an `until_expired` period
   * (it outlives its job by design) or a lock across queues (a job of another queue may hold it under the same id).
   */
  holdOf(digest: string, jobId: string): Promise<RemovableHold | undefined>;
  /** The job holding the lock of `digest` in `queue` now, or `undefined` when it is free. */
  holder(queue: Queue, digest: string): Promise<string | undefined>;
  /** Every job holding the lock of `digest` in `queue` now (at most `lockLimit`; none when it is free). */
  holders(queue: Queue, digest: string): Promise<string[]>;
}

/** A hold read before its job is removed: {@link EnqueueLock.holdOf}. */
export interface RemovableHold {
  /** Gives the hold back if it is still the one read; `true` when it did. */
  release(): Promise<boolean>;
}

/**
 * How long from now a new job waits (its delay: its own, or the queue's default), which a lock's lifetime must cover,
 * in whole milliseconds: BullMQ takes fractional and huge delays, which Redis would refuse in an expiry (the lock's
 * script failing after it took the lock, or BullMQ's add failing on its deduplication TTL). NaN and Infinity count as
 * 0: BullMQ refuses the add. A delayed job with a `timestamp` of the caller's runs at that timestamp plus its delay, as
 * BullMQ schedules it (a timestamp in the future: later than its delay from now).
 */
export function delayOf(queue: Queue, opts: JobsOptions): number {
  const delay = Number(opts.delay ?? queue.defaultJobOptions?.delay ?? 0);
  const timestamp = Number(opts.timestamp);
  return wholeDelay(delay > 0 && Number.isFinite(timestamp) ? timestamp + delay - Date.now() : delay);
}

/**
 * Whether a job id BullMQ answered is the error code of an add that did not happen (a negative integer: a missing
 * parent, …). A single add throws on such a code; `addBulk` answers it as the entry's id. No job has such an id: BullMQ
 * refuses integer custom ids.
 */
export function isAddErrorCode(id: unknown): boolean {
  return typeof id === 'number' || (typeof id === 'string' && /^-\d+$/.test(id));
}
