import type { ConflictSide, LockType } from '../interfaces/unique-job-options.interface.js';
import type { AcquireResult } from './lock-store.js';

/** The answer of a hook that admits the job or names the job in the way. */
export const ADMITTED: AcquireResult = Object.freeze({ acquired: true });

/** A job's enqueue lock, bound to the job: what a lock type may do with it. Every operation is owner-checked. */
export interface JobEnqueueLock {
  /** Releases it now. */
  release(): Promise<void>;
  /**
   * Releases it, if the job still holds it, at the job's end: when its handler returned (before BullMQ records the
   * completion, on the same connection when it can) or when BullMQ recorded its end. Nothing is sent when BullMQ deletes
   * it with the job. `byAttempt`: released by the attempt whose handler returned or threw, before BullMQ records the
   * end: only while the attempt's worker still holds the job (see `EnqueueLock.releaseAtEnd`).
   */
  releaseAtEnd(byAttempt?: boolean): Promise<void>;
  /** Takes it (back) for the job, unless another live job holds it. */
  retake(): Promise<AcquireResult>;
  /**
   * While held, moves its TTL (when it has one) to the job's new run time, `runInMs` from now (owner-checked), never
   * sooner than it ends now: the job was read before the move, and a job added again with its id meanwhile holds it.
   */
  retime(runInMs: number): Promise<void>;
}

/** What a lock type may do while a worker runs one attempt of a job (the worker provides it). */
export interface LockRun {
  /** The job's enqueue lock, when the job took one at enqueue (a job added without the library has none). */
  readonly enqueueLock: JobEnqueueLock | undefined;
  /**
   * Whether this is not the job's first start: a retry, a stalled job recovered, or a job brought back from `failed`
   * or `completed` (by `job.retry()` made outside the library, a dashboard…), which may no longer hold its lock.
   */
  readonly restarted: boolean;
  /** Takes the run-time lock (waiting up to `lockTimeout`); the worker gives it back after the attempt, whatever happens. */
  takeRuntimeLock(): Promise<AcquireResult>;
  /**
   * Whether this worker still holds BullMQ's lock of the job (one Redis call): a worker that stalled past it lost the
   * job to its recovered run, and BullMQ refuses this worker's record of the end.
   */
  stillRuns(): Promise<boolean>;
}

/** An attempt whose handler threw. */
export interface FailedAttempt {
  /**
   * Whether BullMQ fails the job for good after this attempt, by BullMQ's own rule (asked of BullMQ once, on demand: it
   * costs a Redis call). `false` when BullMQ retries it or the handler moved it (a delay, a rate limit).
   */
  endsJob(): Promise<boolean>;
}

/** How a job ended, as BullMQ recorded it. */
export type JobEnd = 'completed' | 'failed';

/**
 * A lock type: what it does at each point of a job's life, one hook per column of the table in docs/how-locks-move.md.
 * The worker calls the hooks; what BullMQ does next with a job is never guessed: `attemptFailed` runs before BullMQ
 * decides (retry, delay, or fail for good), and `finished` after BullMQ recorded the job's end. Adding a lock type is
 * adding a subclass and a line in `locks/index.ts`.
 */
export abstract class Lock {
  /** The name used in `@UniqueJob({ lock })`. */
  abstract readonly type: LockType;
  /**
   * Where duplicates are met: `client` when the lock is taken at enqueue (an enqueue lock), `server` when it is taken
   * while the handler runs (a run-time lock).
   */
  abstract readonly conflictSides: readonly ConflictSide[];
  /** The strategy of each side when `onConflict` leaves it unset. */
  readonly defaultStrategy: Readonly<Record<ConflictSide, string>> = { client: 'log', server: 'log' };
  /** Needs `lockTtl`. */
  readonly requiresTtl: boolean = false;
  /** Whether the enqueue lock outlives its job (only its TTL ends it): a holder whose job is gone still holds it. */
  readonly outlivesJob: boolean = false;
  /** Whether the job takes a run-time lock around its handler (kept across the steps of a step job). */
  readonly takesRuntimeLock: boolean = false;

  /** Whether a lock is taken before the job enters the queue (an enqueue lock). */
  get locksAtEnqueue(): boolean {
    return this.conflictSides.includes('client');
  }

  /** Whether a lock is held while the handler runs (a run-time lock). */
  get locksWhileRunning(): boolean {
    return this.conflictSides.includes('server');
  }

  /** A worker starts an attempt; `acquired: false` names the job in the way (the conflict strategy applies). */
  start(_run: LockRun): Promise<AcquireResult> {
    return Promise.resolve(ADMITTED);
  }

  /** The handler returned: BullMQ records the job completed next. */
  async succeeded(_run: LockRun): Promise<void> {}

  /**
   * The handler threw; BullMQ retries the job, moves it, or fails it for good next (`attempt.endsJob()` asks BullMQ's
   * rule). {@link finished} follows BullMQ's record of the end, whatever was foreseen here. `acquired: false`: the job
   * would wait for its retry beside the job named, which took the lock meanwhile: it is not retried (the worker fails
   * it for good, naming that job, which will do the same work).
   */
  attemptFailed(_run: LockRun, _attempt: FailedAttempt): Promise<AcquireResult> {
    return Promise.resolve(ADMITTED);
  }

  /**
   * A run-time conflict ends the job: its server strategy completed it, or failed it for good by BullMQ's rule (not a
   * retry, nor a move such as `reschedule`'s). BullMQ records the end next: what the job still holds is released ahead
   * of that record, on the worker's connection when it can, as a handler's success does, so a producer that saw the
   * end finds the digest free; not by a worker that stalled past BullMQ's job lock. {@link finished} still follows
   * BullMQ's record. A lock that outlives its job keeps it.
   */
  async endedByConflict(run: LockRun): Promise<void> {
    // Asked first: the slot set's release goes by job id, and what a stalled worker's job holds is its recovered run's.
    if (!this.outlivesJob && run.enqueueLock && (await run.stillRuns())) await run.enqueueLock.releaseAtEnd(true);
  }

  /**
   * BullMQ recorded the job failed for good (also a job it failed without calling the processor), or completed through
   * a conflict strategy: release what is still held.
   */
  async finished(_run: LockRun, _end: JobEnd): Promise<void> {}

  /**
   * The job is brought back to the queue from `failed` or `completed` (`job.retry()`, `queue.retryJobs()` through a
   * guarded queue); `acquired: false` refuses it, naming the job in the way.
   */
  reentering(_enqueueLock: JobEnqueueLock): Promise<AcquireResult> {
    return Promise.resolve(ADMITTED);
  }
}
