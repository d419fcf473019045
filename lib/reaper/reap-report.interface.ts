/** A BullMQ queue the reaper checks jobs in: its name and key prefix (`'bull'` unless you set one). */
export interface ReaperQueue {
  name: string;
  prefix: string;
}

/** What the reaper found orphaned (and released, unless the run was dry). */
export interface ReapedItem {
  /** The Redis key (hashed names only; never user data). */
  key: string;
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
  durationMs: number;
  /** A dry run reports what it would release and changes nothing. */
  dryRun: boolean;
  /** `false` when another process held the reaper's leadership: this run did nothing. */
  leader: boolean;
  /** `true` when this run finished a whole pass over the keys; `false` when its time budget ended it first. */
  complete: boolean;
  /** Keys looked at by this run. */
  scannedKeys: number;
  /** Counts of what was released (or would be, in a dry run). */
  reaped: {
    enqueueLocks: number;
    deduplicationKeys: number;
    runtimeLeases: number;
    idempotencyClaims: number;
    /** Rows deleted by the SQL stores' `prune`. */
    sqlRecords: number;
  };
  /** The released items (the first 1,000). */
  items: ReapedItem[];
}

/** Options of the orphan reaper (`UniqueJobsModule.forRoot({ reaper })`). */
export interface ReaperOptions {
  /** Milliseconds between runs in each process (only the leader works). `false`: never on a timer. Default 60,000. */
  interval?: number | false;
  /** SCAN `COUNT` per call: keys Redis looks at in one step. Default 500. */
  batchSize?: number;
  /** A run stops scanning after this many ms and goes on where it stopped at the next run. Default 1,000. */
  timeBudget?: number;
  /**
   * A general-path enqueue lock or an idempotency claim found orphaned is checked again after this many ms before it
   * is released, so a lock taken just before its job was added is never mistaken for an orphan. Default 15,000.
   */
  grace?: number;
  /**
   * Extra queues whose jobs may own locks under this prefix (besides the queues this application registers and those
   * found by their `meta` key).
   */
  queues?: readonly ReaperQueue[];
}
