import type { Cluster, Redis } from 'ioredis';

/** A BullMQ queue the inspector looks at: its name and its key prefix (BullMQ's `prefix` option, `'bull'` by default). */
export interface InspectedQueue {
  /** The queue name. */
  name: string;
  /** BullMQ's key prefix of the queue. */
  prefix: string;
}

/** Which lock: taken at enqueue (until the job starts or ends), or while the job runs. */
export type HeldLockKind = 'enqueue' | 'runtime';

/**
 * Where a lock lives: a BullMQ deduplication key (the fast-path enqueue lock), the library's general-path enqueue lock
 * (a sorted set, `:queued`; `:expiring` for `until_expired`, which outlives its job by design) or the run-time lock (a
 * sorted set, `:running`).
 */
export type HeldLockStorage = 'deduplication' | 'queued' | 'expiring' | 'running';

/** A job holding a lock. */
export interface LockOwner {
  /** The owner's job id. */
  jobId: string;
  /** End of the owner's lease (ms since epoch); sorted-set locks only (a deduplication key has no lease). */
  leaseExpiresAt?: number;
  /**
   * The owner job's state as BullMQ names it (`waiting`, `active`, `delayed`, `prioritized`, `waiting-children`,
   * `completed`, `failed`, `unknown`), or `missing` when no job with that id exists in the queues inspected (a
   * run-time lock's owner names its queue: its job is read there alone, and one of a queue the inspector does not
   * know, neither inspected nor in the library's queue registry, is `missing`).
   */
  jobState?: string;
  /** The owner job's name, when found. */
  jobName?: string;
  /** When the owner job was created (ms since epoch), when found. */
  since?: number;
  /** The queue the owner job was found in. */
  queue?: string;
  /**
   * A run-time lock's owner whose queue is neither inspected nor in the library's queue registry: the tag it names that
   * queue by (`#` and the first 12 hex digits of the SHA-256 of `<bull prefix>:<queue>`). Its job is `missing` here,
   * but may be alive in that queue.
   */
  queueTag?: string;
  /**
   * The beginning of the owner job's data as JSON ({@link LockInspector.showLock} only; at most 200 characters). It is
   * user data: escape it before rendering it anywhere.
   */
  dataSummary?: string;
}

/** A lock found in Redis. */
export interface HeldLock {
  /** The lock digest (`v1:` + sha256 hex): never user data. */
  digest: string;
  /** Enqueue or run-time lock. */
  kind: HeldLockKind;
  /** Which key holds it. */
  storage: HeldLockStorage;
  /** The Redis key. */
  key: string;
  /** The queue, when known: the queue of a deduplication key, or the queue an owner job was found in. */
  queue?: string;
  /**
   * The jobs holding it (a lock with `lockLimit` > 1 may have several): at most 20 of them (the earliest leases first),
   * plus the job a `jobId` filter asked for. The others are counted in {@link moreOwners}, not read.
   */
  owners: LockOwner[];
  /**
   * How many more jobs hold the key than {@link owners} lists (its sorted set's cardinality minus the owners listed);
   * absent when every holder is listed.
   */
  moreOwners?: number;
  /** Remaining time to live of the key (ms), `undefined` when the key has none. */
  ttlMs?: number;
}

/** Which locks {@link LockInspector.listLocks} returns. Every field narrows the result. */
export interface LockFilter {
  /** A digest prefix (`v1:ab12…`; a bare hex prefix means `v1:` + it). Must be hex: anything else throws. */
  digest?: string;
  /**
   * A glob over digests (`*` any characters, `?` one character; otherwise only the characters of a digest). A pattern
   * starting with hex means `v1:` + it.
   */
  pattern?: string;
  /** Enqueue or run-time locks only. */
  kind?: HeldLockKind;
  /** Locks of this queue only (deduplication keys of the queue, or sorted-set locks whose owner is in it). */
  queue?: string;
  /** Locks held by this job id only. */
  jobId?: string;
}

/** One page of {@link LockInspector.listLocks}. */
export interface LockPage {
  /** The locks of this page (at most `limit`). */
  locks: HeldLock[];
  /** Pass it back to get the next page; `'0'` when the scan is done. */
  cursor: string;
}

/** Paging of {@link LockInspector.listLocks}. */
export interface LockPageRequest {
  /** The `cursor` of the previous page; omit (or `'0'`) to start. */
  cursor?: string;
  /** At most this many locks (default 50, at most 1000). */
  limit?: number;
}

/** How many locks and dead-set entries there are. */
export interface LockCounts {
  /** Enqueue locks: general-path sorted sets (`queued` and `expiring`) plus deduplication keys of the queues. */
  enqueueLocks: number;
  /** Run-time locks. */
  runtimeLocks: number;
  /**
   * Entries of the dead set (rejected duplicates) its index holds, those older than the application's `deadSet.maxAge`
   * and not dropped yet included: the inspector does not know that option. `DeadSetService.size()` (what the admin
   * page and the metrics show) leaves them out.
   */
  deadSet: number;
  /**
   * `false` when the count stopped at its SCAN budget before the end of the key space: `enqueueLocks` and
   * `runtimeLocks` are then lower bounds (`deadSet` is always exact).
   */
  complete: boolean;
}

/** Bounds of {@link LockInspector.counts}. */
export interface LockCountOptions {
  /**
   * SCAN calls the count makes at most (over every node together). Default `200`: with `scanCount` 1,000, a key space
   * of up to ~200,000 keys is counted whole. Past it, the counts are lower bounds and `complete` is `false`.
   * `Infinity`: no limit (a walk of the whole key space).
   */
  maxScans?: number;
  /** SCAN `COUNT`: keys Redis looks at per call. Default `1000`. */
  scanCount?: number;
}

/** Options of {@link LockInspector}. */
export interface LockInspectorOptions {
  /** The Redis client (standalone or Cluster); not closed by the inspector. */
  client: Redis | Cluster;
  /** The library's key prefix (`'uniquejobs'` by default in the module). */
  prefix: string;
  /** The queues whose deduplication keys and jobs to look at (see {@link LockInspector.discoverQueues}). */
  queues: readonly InspectedQueue[];
}
