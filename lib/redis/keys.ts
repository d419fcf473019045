/** Default prefix of the library's keys. */
export const DEFAULT_PREFIX = 'uniquejobs';

/**
 * Every key name the library writes, in one place. Keys of one lock share a hash tag (`{<digest>}`), so on Redis
 * Cluster every script touches one slot. Enqueue locks of the fast path are BullMQ deduplication keys
 * (`<queue prefix>:<queue>:de:uj:<digest>`), which live in the queue's key space; see docs/how-locks-move.md.
 */
export class UniqueJobsKeys {
  constructor(
    /** The configured prefix. */
    readonly prefix: string,
  ) {}

  /**
   * Enqueue lock of the general path (lockLimit > 1, unique across queues, until_expired): a sorted set of owner job
   * ids. `until_expired` locks get their own suffix (`:expiring`): they outlive their job by design, so the orphan
   * reaper must tell them apart and leave them to their TTL.
   */
  enqueueLock(digest: string, lock?: string): string {
    return `${this.prefix}:{${digest}}:${lock === 'until_expired' ? 'expiring' : 'queued'}`;
  }

  /** Run-time lock (while_executing, until_and_while_executing): a sorted set of owner job ids with leases. */
  runtimeLock(digest: string): string {
    return `${this.prefix}:{${digest}}:running`;
  }

  /**
   * An idempotency record of the Redis store (a hash). `recordId` is a hash of (scope, key): user data never appears in
   * a key name.
   */
  idempotencyRecord(recordId: string): string {
    return `${this.prefix}:{${recordId}}:idempotency`;
  }

  /**
   * The channel on which a delivery waiting for an idempotency key in progress announces itself to the key's holder
   * (one channel per prefix; messages name the record by its hashed id).
   */
  get idempotencyWaitersChannel(): string {
    return `${this.prefix}:{idempotency}:waiting`;
  }

  /** The orphan reaper's leadership lock (a sorted set with one leased owner, like a run-time lock). */
  get reaperLeader(): string {
    return `${this.prefix}:{reaper}:leader`;
  }

  /** Dead set index (sorted set: entry id → time). */
  get deadSetIndex(): string {
    return `${this.prefix}:{dead}:index`;
  }

  /** Dead set entries (hash: entry id → JSON). */
  get deadSetEntries(): string {
    return `${this.prefix}:{dead}:entries`;
  }

  /**
   * Dead set byte counter (string: the total length in bytes of the JSON values of {@link deadSetEntries}), kept by the
   * dead-set scripts so that the set is bounded by bytes as well as by entries and age.
   */
  get deadSetBytes(): string {
    return `${this.prefix}:{dead}:bytes`;
  }
}

const DEDUPLICATION_PREFIX = 'uj:';

/** The BullMQ deduplication id of a digest: the fast-path enqueue lock is BullMQ's key `…:de:<this id>`. */
export function deduplicationId(digest: string): string {
  return `${DEDUPLICATION_PREFIX}${digest}`;
}

/** The digest behind a deduplication id set by the library, or `undefined` for any other id. */
export function digestOfDeduplicationId(id: string | undefined): string | undefined {
  return id?.startsWith(DEDUPLICATION_PREFIX) ? id.slice(DEDUPLICATION_PREFIX.length) : undefined;
}

/**
 * Keys of BullMQ's own key space that the library reads or writes, built exactly as BullMQ builds them from a queue's
 * qualified name (`<queue prefix>:<queue name>`, BullMQ's `queue.qualifiedName`).
 */
export const bullKeys = {
  /** A queue's qualified name from its BullMQ prefix and name. */
  qualifiedName: (queuePrefix: string, queueName: string): string => `${queuePrefix}:${queueName}`,
  /** What every key of one queue starts with (a job's hash is this + its id). */
  queueKeyPrefix: (qualifiedName: string): string => `${qualifiedName}:`,
  /** A key of a queue's own: its state sets and lists (`wait`, `active`, `failed`…), `meta`, `events`. */
  queueKey: (qualifiedName: string, suffix: string): string => `${qualifiedName}:${suffix}`,
  /** What every deduplication key of the library contains, whatever its queue (for scans over every queue). */
  deduplicationMarker: `:de:${DEDUPLICATION_PREFIX}`,
  /** A queue's event stream. */
  events: (qualifiedName: string): string => `${qualifiedName}:events`,
  /** A job's hash. */
  job: (qualifiedName: string, jobId: string): string => `${qualifiedName}:${jobId}`,
  /** The deduplication key holding a digest's fast-path enqueue lock. */
  deduplication: (qualifiedName: string, digest: string): string => `${qualifiedName}:de:${deduplicationId(digest)}`,
  /**
   * The start of every deduplication key of the library in a queue (`…:de:uj:`): a digest glob or prefix appended to it
   * makes a SCAN pattern.
   */
  deduplicationBase: (qualifiedName: string): string => `${qualifiedName}:de:${DEDUPLICATION_PREFIX}`,
} as const;
