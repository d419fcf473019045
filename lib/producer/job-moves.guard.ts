import type { ParkedRecordMarks } from '../redis/parked-record-marks.js';
import { Job, type MinimalQueue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { DuplicateJobError } from '../errors/duplicate-job.error.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { BoundEnqueueLock } from '../locks/bound-enqueue-lock.js';
import type { EnqueueLock } from '../locks/enqueue-lock.js';
import type { SoonerEnd } from '../locks/lock-marks.js';
import type { AcquireResult, LockStore } from '../locks/lock-store.js';
import { lockedAs } from '../locks/locked-digest.js';
import type { JobDefinition, JobDefinitions } from '../options/job-definitions.js';
import { bullKeys, RESCHEDULES_FIELD, type UniqueJobsKeys } from '../redis/keys.js';
import { runtimeOwnersOf } from '../redis/runtime-lock-owner.js';
import { asError } from '../errors/thrown.js';
import { parkedLeaseMs, wholeDelay } from '../common/bullmq-lifecycle.js';
import type { IdempotencyDefinitions } from '../idempotency/idempotency-definitions.js';
import { retimeHandover } from '../idempotency/step-handover.js';

import { RemovalRelease } from './removal-release.js';

type FinishedState = 'failed' | 'completed';

/** What the guard wraps of a queue's or worker's backend (BullMQ's `IQueueBackend`). */
interface MovingBackend {
  /** `job.retry()`. */
  retryFinishedJob(
    job: Job<unknown, unknown>,
    state: FinishedState,
    opts?: { resetAttemptsMade?: boolean },
  ): Promise<void>;
  /** One batch of `queue.retryJobs()`: resolves a cursor (more to do while non-zero). */
  retryFinishedJobs(state?: FinishedState, count?: number, timestamp?: number): Promise<number>;
  /** `job.changeDelay(delay)`. */
  changeDelay(jobId: string, delay: number): Promise<void>;
  /** `job.promote()`. */
  promote(jobId: string): Promise<void>;
  /** `job.remove()`, `queue.remove(id)`: 1 when the job was removed, 0 when it is locked by a worker. */
  remove(jobId: string, removeChildren: boolean): Promise<number>;
}

/** What a guarded move read before it moved a job's run time. */
interface BeforeMove {
  /** The job's `timestamp` (when it was added): another job added with its id since has its own. */
  readonly timestamp: number;
  readonly sooner: SoonerEnd;
}

/** A queue or a worker: where the jobs it retries live. */
type MovingOwner = MinimalQueue & { name: string; qualifiedName: string; getBackend(): unknown };

const GUARDED = new WeakSet<object>();

/**
 * Follows the moves a user makes on a job through a guarded queue or worker (their backend's methods, BullMQ's backend
 * interface). `changeDelay` and `promote` move the job's run time: a lock with `lockTtl` (which lives that long past
 * the run time) follows it. And a finished job that re-enters the queue takes its lock again:
 * - `job.retry()`: the lock is taken before the job moves; when another live job holds the digest, `retry()` rejects
 *   with {@link DuplicateJobError} and the job stays where it was.
 * - `queue.retryJobs()`: BullMQ moves many jobs in one script; right after it, each unique job it moved (read from
 *   BullMQ's event stream) takes its lock back. One whose digest another job took meanwhile meets that job when it
 *   starts (the conflict strategy), as does a job brought back by a process or dashboard without the library.
 * And a job removed (`job.remove()`, `queue.remove(id)`) gives back its slot-set enqueue lock in the same call, which
 * would otherwise outlive it until the orphan reaper's pass reaches it (BullMQ deletes a deduplication key itself).
 */
export class JobMovesGuard {
  private readonly removal: RemovalRelease;

  constructor(
    private readonly definitions: JobDefinitions,
    private readonly client: Redis | Cluster,
    private readonly events: UniqueJobsEvents,
    private readonly logger: LoggerLike,
    private readonly enabled: boolean,
    /** Where run-time locks live, and the idempotency keys: what a step job parked follows its run time. */
    private readonly parked: {
      readonly store: LockStore;
      readonly keys: UniqueJobsKeys;
      readonly idempotencyDefinitions: IdempotencyDefinitions;
      readonly parkedRecords?: ParkedRecordMarks;
    },
  ) {
    this.removal = new RemovalRelease(definitions, client, events, logger);
  }

  /** Installs the guard on a queue's or worker's backend (idempotent). */
  install(owner: MovingOwner): void {
    const backend = owner.getBackend() as Partial<MovingBackend> | undefined;
    if (!backend || GUARDED.has(backend)) return;
    const methods = ['retryFinishedJob', 'retryFinishedJobs', 'changeDelay', 'promote'] as const;
    if (methods.some((method) => typeof backend[method] !== 'function')) return;
    GUARDED.add(backend);
    const { retryOne, retryMany, changeDelay, promote } = {
      retryOne: backend.retryFinishedJob!.bind(backend),
      retryMany: backend.retryFinishedJobs!.bind(backend),
      changeDelay: backend.changeDelay!.bind(backend),
      promote: backend.promote!.bind(backend),
    };
    backend.changeDelay = async (jobId, delay) => {
      const before = await this.beforeMove(owner, jobId);
      await changeDelay(jobId, delay);
      await this.retime(owner, jobId, delay, before);
    };
    backend.promote = async (jobId) => {
      const before = await this.beforeMove(owner, jobId);
      await promote(jobId);
      await this.retime(owner, jobId, 0, before);
    };
    if (typeof backend.remove === 'function') {
      const remove = backend.remove.bind(backend);
      backend.remove = async (jobId, removeChildren) => {
        if (!this.enabled || !this.definitions.releasesOnRemoval(owner.name)) return remove(jobId, removeChildren);
        // Read before: the job's name and options (its lock's digest) are gone with it, and the hold is released only
        // if it is still the one read: the slot its mark names, renewed or re-taken since by the library's own moves of
        // the job or not (a new job with the same id draws a new mark).
        const hold = await this.removal.holdOf(owner, jobId);
        const removed = await remove(jobId, removeChildren);
        if (removed === 1 && hold) await this.removal.giveBack(owner, jobId, hold);
        return removed;
      };
    }
    backend.retryFinishedJob = async (job, state, opts) => {
      // A job not in `state` is BullMQ's to refuse, before any lock is taken.
      if (this.guards(job) && (await job.getState()) === state) await this.relock(job, true);
      await retryOne(job, state, opts);
      // BullMQ gives the job its attempts back: its reschedules too (attempts that did not count).
      if (opts?.resetAttemptsMade && this.enabled && this.definitions.find(job.queueName, job.name)) {
        await this.client.hdel(bullKeys.job(job.queueQualifiedName, job.id!), RESCHEDULES_FIELD);
      }
    };
    backend.retryFinishedJobs = async (state = 'failed', count, timestamp) => {
      if (!this.enabled || !this.definitions.hasQueue(owner.name)) return retryMany(state, count, timestamp);
      const stream = bullKeys.events(owner.qualifiedName);
      const [last] = await this.client.xrevrange(stream, '+', '-', 'COUNT', 1);
      const cursor = await retryMany(state, count, timestamp);
      const entries = await this.client.xrange(stream, last ? `(${last[0]}` : '-', '+');
      for (const [, fields] of entries) {
        const event = Object.fromEntries(pairs(fields));
        if (event.event !== 'waiting' || event.prev !== state || !event.jobId) continue;
        // BullMQ has queued them already: a worker may have started or even finished one before this runs, and
        // taking its lock then would leave it held by a running job that gave it up at its start, or a finished one.
        const job = await Job.fromId(owner, event.jobId);
        if (job) await this.relock(job, false, true);
      }
      return cursor;
    };
  }

  /**
   * Read before a job's run time moves: the job (its timestamp tells it from a job added again with its id by the time
   * the move lands) and what the move may do to its enqueue lock's hold ({@link EnqueueLock.soonerEndOf}). A failed
   * read leaves the move to end no hold sooner.
   */
  private async beforeMove(owner: MovingOwner, jobId: string): Promise<BeforeMove | undefined> {
    // A library connection that is not ready would hold BullMQ's move up (ioredis queues the read until it reconnects).
    if (!this.enabled || !this.definitions.hasQueue(owner.name) || this.client.status !== 'ready') return undefined;
    try {
      const job = await Job.fromId(owner, jobId);
      const held = job && this.heldLock(job);
      if (!held) return undefined;
      return { timestamp: job.timestamp, sooner: await held.lock.soonerEndOf({ job, digest: held.digest }) };
    } catch {
      return undefined;
    }
  }

  /**
   * The run time of a job moved to `runInMs` from now: its lock's TTL follows (when its queue has unique jobs), and so
   * do the run-time lock and the idempotency claim a step job parked for its next delivery (kept until it is due plus a
   * day: `parkedLeaseMs`). The lock's hold ends sooner only as read `before` the move, for the very job read then.
   */
  private async retime(owner: MovingOwner, jobId: string, runInMs: number, before?: BeforeMove): Promise<void> {
    const unique = this.enabled && this.definitions.hasQueue(owner.name);
    const keyed = this.enabled && this.parked.idempotencyDefinitions.hasQueue(owner.name);
    if (!unique && !keyed) return;
    const job = await Job.fromId(owner, jobId);
    if (!job) return;
    const held = unique ? this.heldLock(job) : undefined;
    const sooner = before?.timestamp === job.timestamp ? before.sooner : 'never';
    if (held) await held.lock.retime({ job, digest: held.digest }, runInMs, sooner);
    if (unique) await this.retimeParked(job, runInMs);
    const idempotency = keyed ? this.parked.idempotencyDefinitions.find(job.queueName, job.name) : undefined;
    if (!idempotency) return;
    // Best effort: BullMQ moved the job already, and this store (maybe SQL, out of reach) is asked for any job of the
    // queue, stepping or not. A handover left as it was keeps its old end.
    try {
      await retimeHandover(idempotency, job, runInMs, this.parked.parkedRecords);
    } catch (error) {
      this.logger.warn(
        `Job ${jobId} (queue "${owner.name}") was moved, but its idempotency handover (if it parked one between two steps) could not follow its new run time (${describe(error)}): it keeps its old end`,
      );
    }
  }

  /**
   * A parked run-time lock (a step job between two steps) lasts `parkedLeaseMs` past the job's new run time, as
   * parking it made it last past the old one: else a duplicate could start once the old one passed, and the job, due
   * later, would meet it. Only a slot still marked parked is renewed (one Redis call, on a queue whose job has one), also
   * one an earlier build parked under the job's former owner (`legacyRuntimeLockOwner`: the job's next delivery takes
   * it over), in the same call when the job holds none under the owner this build writes.
   */
  private async retimeParked(job: Job<unknown, unknown>, runInMs: number): Promise<void> {
    const definition = this.definitions.find(job.queueName, job.name);
    if (!definition?.lock.takesRuntimeLock) return;
    let digest: string;
    try {
      digest = lockedAs(job)?.digest ?? definition.digestOf(job); // as the worker computes it when the job resumes
    } catch {
      return; // lock arguments that cannot be hashed: the job fails when it starts, it holds nothing
    }
    const { store, keys } = this.parked;
    const key = keys.runtimeLock(digest);
    const { owner, former } = runtimeOwnersOf(job, definition.options.uniqueAcross.includes('queues'));
    const leaseMs = parkedLeaseMs(definition.options.runtimeLockLease) + wholeDelay(runInMs);
    await store.renewParked(key, owner, former, leaseMs);
  }

  /** A job's definition and the enqueue lock of the kind it took, with its digest (were the options changed since). */
  private heldLock(
    job: Job<unknown, unknown>,
  ): { definition: JobDefinition; lock: EnqueueLock; digest: string } | undefined {
    const definition = this.definitions.find(job.queueName, job.name);
    const locked = lockedAs(job);
    const lock = locked && definition?.enqueueLockOf(locked.by);
    return definition && locked && lock ? { definition, lock, digest: locked.digest } : undefined;
  }

  /** Whether the job has an enqueue lock of this application's. */
  private guards(job: Job<unknown, unknown>): boolean {
    return this.enabled && this.definitions.find(job.queueName, job.name)?.enqueueLock !== undefined;
  }

  /**
   * Takes a re-entering job's lock; `refuse`: a held lock refuses the re-entry (else it is logged and left).
   * `whileWaiting`: only while the job is still there, unfinished and run by no worker (it was queued already).
   */
  private async relock(job: Job<unknown, unknown>, refuse: boolean, whileWaiting = false): Promise<void> {
    const held = this.heldLock(job);
    if (!held) return;
    const { definition, lock, digest } = held;
    // A job fetched here has no token: bound as "running" it is taken only while no worker holds the job's lock.
    const bound = new BoundEnqueueLock(lock, { job, digest }, NO_REPORT, undefined, whileWaiting);
    const admitted: AcquireResult = await definition.lock.reentering(bound);
    const ids = { queue: job.queueName, jobName: job.name, digest, jobId: job.id! };
    if (admitted.acquired) {
      this.events.emit({ type: 'locked', lock: 'enqueue', ...ids });
      return;
    }
    if (refuse) throw new DuplicateJobError(job.queueName, job.name, digest, admitted.holder);
    this.logger.warn(
      `Job ${job.id} (queue "${job.queueName}") was retried while job ${admitted.holder ?? '(unknown)'} holds its digest ${digest}: it meets the conflict strategy when it starts`,
    );
  }
}

const NO_REPORT = { released: () => undefined, error: () => undefined };

function describe(error: unknown): string {
  return asError(error).message;
}

function* pairs(fields: string[]): Generator<[string, string]> {
  for (let i = 0; i + 1 < fields.length; i += 2) yield [fields[i], fields[i + 1]];
}
