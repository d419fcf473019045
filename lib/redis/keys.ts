import { hash } from 'node:crypto';

/** Escapes Redis glob characters (`* ? [ ] \\`) so a literal part of a MATCH pattern matches only itself. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** What the library's keys under its prefix end with, by what they hold: `<prefix>:{<tag>}:<suffix>`. */
export const KEY_SUFFIX = {
  /** An enqueue lock of the slot-set path. */
  queued: 'queued',
  /** An `until_expired` period. */
  expiring: 'expiring',
  /** A run-time lock. */
  running: 'running',
  /** A record of the Redis idempotency store. */
  idempotency: 'idempotency',
  /** Which `replace` call reports a job removed (short-lived). */
  removed: 'removed',
  /** Never written: `replace` asks Redis whether it takes writes with `SET … XX` on it (see `writeProbe`). */
  probe: 'probe',
  /** Where the job an idempotency record is parked for (between two of its steps) lives (see `parkedRecord`). */
  parked: 'parked',
} as const;

/**
 * A key of the library's, read back: its prefix, the hash tag inside the braces (a digest, a record id…), its suffix
 * (`<prefix>:{<tag>}:<suffix>`: the prefix is everything before the last `:{` that leaves a tag without `}`). In linear
 * time, with string searches: a regular expression with a leading `(.+)` backtracks quadratically on keys of many
 * `:{`, and the reaper reads every key of the server.
 */
export function parseOwnKey(key: string): { prefix: string; tag: string; suffix: string } | undefined {
  const close = key.lastIndexOf('}:');
  const suffix = key.slice(close + 2);
  if (close < 0 || !/^[a-z]+$/.test(suffix)) return undefined;
  const open = key.lastIndexOf(':{', close - 3); // a tag of one character at least
  if (open < 1) return undefined; // a prefix of one character at least
  const tag = key.slice(open + 2, close);
  return tag.includes('}') ? undefined : { prefix: key.slice(0, open), tag, suffix };
}

/**
 * Recognises the keys the library and BullMQ write, under any prefix: for the tools that survey a Redis (the CLI, the
 * inspector). Each captures the prefix first.
 */
export const KEY_SHAPES = {
  /** `<prefix>:{v1:<64 hex>}:queued|expiring|running`: prefix, digest, suffix. */
  lock: /^(.+):\{(v\d+:[0-9a-f]{64})\}:(queued|expiring|running)$/,
  /** `<prefix>:{<base64url sha256>}:idempotency`: prefix, record id. */
  idempotency: /^(.+):\{([A-Za-z0-9_-]{43})\}:idempotency$/,
  /** `<prefix>:{dead}:index`: prefix. */
  deadSetIndex: /^(.+):\{dead\}:index$/,
  /** `<bull prefix>:<queue>:de:uj:v1:<64 hex>` (queue names hold no `:`): BullMQ prefix, queue, digest. */
  deduplication: /^(.+):([^:]+):de:uj:(v\d+:[0-9a-f]{64})$/,
  /** `<bull prefix>:<queue>:meta`: BullMQ prefix, queue. */
  meta: /^(.+):([^:]+):meta$/,
} as const;

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
    return `${this.prefix}:{${digest}}:${lock === 'until_expired' ? KEY_SUFFIX.expiring : KEY_SUFFIX.queued}`;
  }

  /** How every key of the library under this prefix starts: `<prefix>:{`. */
  get ownKeyStart(): string {
    return `${this.prefix}:{`;
  }

  /** A SCAN pattern over the library's keys under this prefix: `<prefix>:{<tag glob>}:<suffix glob>`. */
  pattern(tagGlob = '*', suffixGlob = '*'): string {
    return `${escapeGlob(this.prefix)}:{${tagGlob}}:${suffixGlob}`;
  }

  /** A key's shape for a reader (`<prefix>:{<tag>}:<suffix>`, parts possibly placeholders): text, not a key to send. */
  shape(tag: string, suffix: string): string {
    return `${this.prefix}:{${tag}}:${suffix}`;
  }

  /** Run-time lock (while_executing, until_and_while_executing): a sorted set of owner job ids with leases. */
  runtimeLock(digest: string): string {
    return `${this.prefix}:{${digest}}:${KEY_SUFFIX.running}`;
  }

  /**
   * An idempotency record of the Redis store (a hash). `recordId` is a hash of (scope, key): user data never appears in
   * a key name.
   */
  idempotencyRecord(recordId: string): string {
    return `${this.prefix}:{${recordId}}:${KEY_SUFFIX.idempotency}`;
  }

  /**
   * The mark, kept a few seconds, of the `replace` call that reports a job it removed: one key per job instance (its
   * queue, id and creation time, hashed: a job id is user data when the producer chose it).
   */
  removalReport(qualifiedName: string, jobId: string, timestamp: number): string {
    const tag = hash('sha256', JSON.stringify([qualifiedName, jobId, timestamp]), 'base64url');
    return `${this.prefix}:{${tag}}:${KEY_SUFFIX.removed}`;
  }

  /**
   * Where the step job an idempotency record (of any store) is handed over to lives, kept while the record is parked:
   * one key per resume token (`resumeOwner`, hashed), written by the library's processes on this Redis only, so that a
   * delivery meeting the record can tell a job of its own deployment (gone, finished or replaced since) from one it
   * cannot see (another deployment sharing a SQL store).
   */
  parkedRecord(resumeOwner: string): string {
    const tag = hash('sha256', resumeOwner, 'base64url');
    return `${this.prefix}:{${tag}}:${KEY_SUFFIX.parked}`;
  }

  /**
   * A key that never exists, in a slot-set lock's hash slot: a `SET` on it with `XX` writes nothing, and is refused,
   * as any write that can grow memory, by a Redis at `maxmemory` (`noeviction`). `replace` asks it (and
   * {@link bullKeys.writeProbe}, in the queue's slot) before it removes a holder.
   */
  writeProbe(digest: string): string {
    return `${this.prefix}:{${digest}}:${KEY_SUFFIX.probe}`;
  }

  /**
   * The channel on which a delivery waiting for an idempotency key in progress announces itself to the key's holder
   * (one channel per prefix; messages name the record by its hashed id).
   */
  get idempotencyWaitersChannel(): string {
    return `${this.prefix}:{idempotency}:waiting`;
  }

  /**
   * The queues the library's processes guard, as qualified names (a set, bounded by the `registerQueue` script): what
   * the CLI inspects without scanning the whole key space for BullMQ's `meta` keys.
   */
  get queueRegistry(): string {
    return `${this.prefix}:{queues}:known`;
  }

  /** The orphan reaper's leadership lock (a sorted set with one leased owner, like a run-time lock). */
  get reaperLeader(): string {
    return `${this.prefix}:{reaper}:leader`;
  }

  /**
   * The `addBulk` calls in progress that take slot-set locks for many jobs before adding them (a sorted set of leased
   * tokens, like a run-time lock): see `BulksInProgress`.
   */
  get bulksInProgress(): string {
    return `${this.prefix}:{bulks}:adding`;
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

  /**
   * Dead set entries being retried (sorted set: `<entry id>|<its score in the index>|<retry token>|<its JSON>` → end
   * of the retry's claim, ms): an entry taken out of the dead set for a retry, put back should its retry fail or its
   * claim end.
   */
  get deadSetClaims(): string {
    return `${this.prefix}:{dead}:claims`;
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

/** The field of a job's hash counting its reschedules (the `reschedule` strategy's `maxReschedules`). */
export const RESCHEDULES_FIELD = 'ujReschedules';

/**
 * The field of a job's hash counting the steps its handler moved it through (a step job of a lock type with a run-time
 * lock): a delivery of it is a later step whatever became of the run-time lock slot its last step parked.
 */
export const STEPS_FIELD = 'ujSteps';

/**
 * The field of a job's hash naming the digest of the run-time lock slot its last step parked (written before the slot
 * is parked): a slot parked under another digest is not this job's, whose id was given to it after the parker was
 * removed (see `readParkerStanding`).
 */
export const PARKED_FIELD = 'ujParked';

/** BullMQ's key prefix when a queue sets none. */
export const DEFAULT_QUEUE_PREFIX = 'bull';

/**
 * A queue's BullMQ prefix when it is one of its own: `undefined` for BullMQ's default (`bull`, or `{bull}` as Redis
 * Cluster users write it), or none given. Queues of one name under two prefixes (two environments sharing a Redis,
 * tenants under prefixes of their own) are two queues, and their digests and default idempotency scopes say so.
 */
export function ownQueuePrefix(prefix: string | undefined): string | undefined {
  return prefix === undefined || prefix === DEFAULT_QUEUE_PREFIX || prefix === `{${DEFAULT_QUEUE_PREFIX}}`
    ? undefined
    : prefix;
}

/**
 * Keys of BullMQ's own key space that the library reads or writes, built exactly as BullMQ builds them from a queue's
 * qualified name (`<queue prefix>:<queue name>`, BullMQ's `queue.qualifiedName`).
 */
export const bullKeys = {
  /** A queue's qualified name from its BullMQ prefix and name. */
  qualifiedName: (queuePrefix: string, queueName: string): string => `${queuePrefix}:${queueName}`,
  /** A queue's (or worker's) BullMQ prefix, from its qualified name (the inverse of {@link bullKeys.qualifiedName}). */
  prefixOf: (queue: { qualifiedName: string; name: string }): string =>
    queue.qualifiedName.slice(0, queue.qualifiedName.length - queue.name.length - 1),
  /** What every key of one queue starts with (a job's hash is this + its id). */
  queueKeyPrefix: (qualifiedName: string): string => `${qualifiedName}:`,
  /** A key of a queue's own: its state sets and lists (`wait`, `active`, `failed`…), `meta`, `events`. */
  queueKey: (qualifiedName: string, suffix: string): string => `${qualifiedName}:${suffix}`,
  /** What every deduplication key of the library contains, whatever its queue (for scans over every queue). */
  deduplicationMarker: `:de:${DEDUPLICATION_PREFIX}`,
  /** A queue's `meta` hash (written when a queue or worker starts: how queues are discovered). */
  meta: (qualifiedName: string): string => `${qualifiedName}:meta`,
  /** A SCAN pattern over every queue's `meta` hash, whatever its prefix. */
  metaPattern: '*:meta',
  /** The qualified name of the queue a `meta` key belongs to. */
  queueOfMeta: (metaKey: string): string => metaKey.slice(0, -':meta'.length),
  /** A queue's event stream. */
  events: (qualifiedName: string): string => `${qualifiedName}:events`,
  /** A job's hash. */
  job: (qualifiedName: string, jobId: string): string => `${qualifiedName}:${jobId}`,
  /**
   * A key that never exists in a queue's hash slot, beside its jobs: `replace` probes it (as `writeProbe` of the
   * library's keys) before it removes a holder. It cannot name a job (a custom id holding a `:` must hold two; counter
   * ids hold none) nor any key BullMQ writes.
   */
  writeProbe: (qualifiedName: string): string => `${qualifiedName}:uj:probe`,
  /** A job's lock while a worker runs it (value: that attempt's token). */
  jobLock: (qualifiedName: string, jobId: string): string => `${qualifiedName}:${jobId}:lock`,
  /** The deduplication key holding a digest's fast-path enqueue lock. */
  deduplication: (qualifiedName: string, digest: string): string => `${qualifiedName}:de:${deduplicationId(digest)}`,
  /**
   * The start of every deduplication key of the library in a queue (`…:de:uj:`): a digest glob or prefix appended to it
   * makes a SCAN pattern.
   */
  deduplicationBase: (qualifiedName: string): string => `${qualifiedName}:de:${DEDUPLICATION_PREFIX}`,
} as const;
