import type { Job, JobsOptions, Queue } from 'bullmq';
import type { DeadSetService } from '../dead-set/dead-set.service.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { ConflictSide, ResolvedJobDefinition } from '../interfaces/unique-job-options.interface.js';

export type { ConflictSide };

/** A duplicate found at enqueue. */
export interface ClientConflict {
  /** Where it was met: at enqueue (tells it from a {@link ServerConflict}). */
  readonly side: 'client';
  /** The queue the duplicate was being added to. */
  readonly queue: Queue;
  /** The duplicate's job name. */
  readonly name: string;
  /** The duplicate's data. */
  readonly data: unknown;
  /** The options the producer passed (the library's own additions removed). */
  readonly opts: JobsOptions;
  /** The digest the duplicate shares with the holder (`v1:` + 64 hex digits). */
  readonly digest: string;
  /** Id of the job that holds the lock. */
  readonly existingJobId: string | undefined;
  /** The unique-job definition of (queue, name), with its options in force. */
  readonly definition: ResolvedJobDefinition;
}

/**
 * A duplicate found in the worker: the job could not take its run-time lock, or it came back to the queue (a retry of
 * a finished job made without the library) and its enqueue lock is held by another job.
 */
export interface ServerConflict {
  /** Where it was met: in the worker (tells it from a {@link ClientConflict}). */
  readonly side: 'server';
  /** The duplicate job, as the worker got it. */
  readonly job: Job<unknown, unknown>;
  /** The worker's lock token for the job (needed to move it, e.g. back to delayed). */
  readonly token: string | undefined;
  /** The digest the duplicate shares with the holder (`v1:` + 64 hex digits). */
  readonly digest: string;
  /** Id of a job that holds the lock. */
  readonly existingJobId: string | undefined;
  /** The unique-job definition of (queue, name), with its options in force. */
  readonly definition: ResolvedJobDefinition;
}

/** How a strategy resolved a client conflict. */
export interface ClientResolution {
  /** What the explicit producer API returns. */
  readonly result: EnqueueResult;
  /** If set, plain `queue.add` throws this instead of returning a job. */
  readonly error?: Error;
}

/** What the library hands a strategy to act with. */
export interface ConflictTools {
  /** The module's logger (`forRoot({ logger })`; silent with `logger: false`). */
  readonly logger: {
    /** Logs a warning (e.g. a fallback to another strategy). */
    warn(message: string): void;
    /** Logs an informational line. */
    log(message: string): void;
  };
  /** The event stream: `events.emit(…)` publishes an event of the library's types (e.g. a `duplicate`). */
  readonly events: UniqueJobsEvents;
  /** The dead set, where `reject` keeps duplicates. */
  readonly deadSet: DeadSetService;
  /**
   * Removes the job holding the lock if it has not started, then enqueues the duplicate in its place. Resolves to
   * `undefined` when the existing job is running (or could not be removed), so the strategy can fall back.
   */
  replaceExisting(conflict: ClientConflict): Promise<EnqueueResult | undefined>;
  /**
   * The job holding the conflict's lock now (it may have changed since the conflict was met, e.g. when other producers
   * replaced it), or `undefined` when the lock is free: what a fallback should name.
   */
  holderOf(conflict: ClientConflict): Promise<string | undefined>;
  /** The strategy registered under a name (used for fallbacks). */
  strategy(name: string): ConflictStrategy;
  /** Counts one more reschedule of a job and returns the count (kept on the job's own hash, so it dies with it). */
  countReschedule(job: Job<unknown, unknown>): Promise<number>;
}

/**
 * A conflict strategy: what happens to a duplicate. Implement it and register an instance with
 * `UniqueJobsModule.forRoot({ strategies: [...] })` to add your own; `sides` says where it can apply, and the options
 * of every job are checked against it at bootstrap.
 */
export interface ConflictStrategy {
  /** The name used in `onConflict`. */
  readonly name: string;
  /** The sides this strategy can handle. */
  readonly sides: readonly ConflictSide[];
  /** Resolves a duplicate at enqueue; may throw to fail `queue.add` and the explicit API alike. */
  onClientConflict?(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution>;
  /**
   * Resolves a duplicate in the worker. The value returned becomes the job's return value (the job completes without
   * running); throwing fails the attempt (BullMQ control errors such as `DelayedError` included).
   */
  onServerConflict?(conflict: ServerConflict, tools: ConflictTools): Promise<unknown>;
}
