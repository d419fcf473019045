import type { ReaperOptions, ReaperQueue } from '../../options/reaper-options.js';

export type { ReaperOptions, ReaperQueue };

/** What the reaper found orphaned (and released, unless the run was dry). */
export interface ReapedItem {
  /** The Redis key (hashed names only; never user data). */
  key: string;
  /**
   * What was released: an owner of a slot-set enqueue lock, a BullMQ deduplication key (the enqueue lock on the fast
   * path), an owner's ended lease of a run-time lock, or an idempotency record's in-progress claim (Redis store).
   */
  kind: 'enqueueLock' | 'deduplicationKey' | 'runtimeLease' | 'idempotencyClaim';
  /** The job that held it. */
  jobId?: string;
  /** Why it was orphaned: `'lease ended'`, `'job gone'`, `'job finished'`. */
  reason: string;
}

/** What one reaper run did. */
export interface ReapReport {
  /** When the run started (ms since epoch). */
  startedAt: number;
  /** How long the run took (ms), bounded by the reaper's time budget. */
  durationMs: number;
  /** A dry run reports what it would release and changes nothing. */
  dryRun: boolean;
  /**
   * `false` when another process held the reaper's leadership: this run did nothing. Always `true` for a dry run, which
   * needs none.
   */
  leader: boolean;
  /** `true` when this run finished a whole pass over the keys; `false` when its time budget ended it first. */
  complete: boolean;
  /**
   * `true` when the application's shutdown cut this run short while it waited out the grace period: the orphans it
   * found were neither checked again nor released (a later run, of this process or another, finds them again).
   */
  interrupted: boolean;
  /** Keys looked at by this run: every key of the walk (each node's key space), the library's or not. */
  scannedKeys: number;
  /**
   * Keys whose check failed (e.g. a key of the wrong type under the library's prefix, a script error, a queue of this
   * application its Redis user may not read): left alone, and the run goes on with the others.
   */
  failedKeys: number;
  /** The first failure's message, when {@link failedKeys} is not 0. */
  firstFailure?: string;
  /**
   * General-path enqueue lock owners found orphaned that this run did not release because a large `addBulk` (1,000 or
   * more entries, any of them on the general path) was in progress: their jobs may be on their way (see
   * `BulksInProgress`). A run keeps them back when a bulk was announced both when they were found and after the grace,
   * and re-checks at most 1,000 of them at its next run (the rest when its pass finds them again). A dry run counts
   * here the general-path suspects it found while a bulk is announced, instead of listing them as released.
   */
  deferred: number;
  /** Counts of what was released (or would be, in a dry run). */
  reaped: {
    /** Owners of slot-set enqueue locks whose lease ended or whose job is gone or finished. */
    enqueueLocks: number;
    /** BullMQ deduplication keys (one-slot enqueue locks) whose job is gone or finished. */
    deduplicationKeys: number;
    /**
     * Run-time lock slots: leases that ended (their worker died or stalled) but were still recorded, and slots parked
     * for a step job's next delivery whose job is gone or finished.
     */
    runtimeLeases: number;
    /** In-progress idempotency claims (Redis store) whose lease ended and whose job is gone or finished. */
    idempotencyClaims: number;
    /** Rows deleted by the SQL stores' `prune`. */
    sqlRecords: number;
  };
  /** The released items (the first 1,000). */
  items: ReapedItem[];
}
