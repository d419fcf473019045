import type { IdempotencyStore } from './idempotency-store.interface.js';

/**
 * The job as an idempotency key function sees it: the BullMQ job being processed (only these fields are read, so a
 * plain object works in tests).
 */
export interface IdempotencyJob<DataType = unknown> {
  /** The job's id: never a key (a retried or re-added delivery of the same effect has another). */
  readonly id?: string;
  /** The job's name. */
  readonly name: string;
  /** Name of the job's queue. */
  readonly queueName: string;
  /** The queue's BullMQ prefix (part of the default scope when it is not `bull`). */
  readonly prefix?: string;
  /** The job's data: where the key comes from. */
  readonly data: DataType;
}

/**
 * Reads the idempotency key from the job's domain data, e.g. `job => job.data.eventId`. Never use the job id: a
 * re-delivered or re-enqueued job has a new one. A string or a finite number; anything else counts as missing.
 */
export type IdempotencyKeyFunction<DataType = unknown> = {
  key(job: IdempotencyJob<DataType>): string | number | null | undefined;
}['key'];

/** Picks the part of the data whose canonical JSON is the payload fingerprint. */
export type IdempotencyFingerprintFunction<DataType = unknown> = {
  pick(data: DataType): unknown;
}['pick'];

/** What is compared between deliveries of one key: the whole data, chosen top-level fields, a function, or nothing. */
export type IdempotencyFingerprint<DataType = unknown> =
  'data' | false | readonly FingerprintField<DataType>[] | IdempotencyFingerprintFunction<DataType>;

/** A top-level field of the job data (any string when the data type is not known). */
export type FingerprintField<DataType> = unknown extends DataType ? string : keyof DataType & string;

/** Options of `@IdempotencyKey` with a module-wide default (`forRoot({ idempotency: { defaults } })`). */
export interface IdempotencyDefaults {
  /** How long a completed (or kept failed) record is kept, in ms: the deduplication window. Default 24 h. */
  ttl: number;
  /**
   * Lease of an in-progress claim in ms, renewed every third of it while the handler runs. Default `30000`. Between two
   * steps of a step job the claim is handed over for a day past the job's run time instead (this lease when longer).
   */
  lease: number;
  /**
   * Another delivery of the key is running: `'delay'` (default) moves this job back to delayed until that claim's lease
   * could have ended, without using a retry attempt; `'fail'` fails the attempt with `IdempotencyInProgressError`.
   */
  onInProgress: 'delay' | 'fail';
  /**
   * The handler threw: `'release'` (default) deletes the claim so the retry (or a later delivery) runs again;
   * `'keep'` (Stripe-style) records a final failure (no attempts left) so later deliveries of the key fail with
   * `IdempotencyKeyFailedError` without running. Retries of the same job always run again.
   */
  onFailure: 'release' | 'keep';
  /** The key function returned no key: `'error'` (default) fails the job for good; `'run'` runs it unguarded and warns. */
  onMissingKey: 'error' | 'run';
  /**
   * Largest handler result kept in a record, in bytes of its JSON text (UTF-8). A larger result completes the record
   * without it (the effect has happened: refusing it would run the effect again), with a warning: later deliveries of
   * the key replay `undefined`. The job's own return value is BullMQ's, and unchanged. Default `1048576` (1 MiB); `0`
   * keeps no result (and warns of none); at most `536870912` (512 MiB, Redis' largest string).
   */
  maxResultBytes: number;
}

/** Options of `@IdempotencyKey`. */
export interface IdempotencyKeyOptions<DataType = unknown> extends Partial<IdempotencyDefaults> {
  /** Reads the key from the job's data. */
  key: IdempotencyKeyFunction<DataType>;
  /** Job names these options apply to. Absent: every job name of the queue that has no options of its own. */
  jobName?: string | readonly string[];
  /**
   * Namespace of the keys: two scopes never share a record. Default `'<queue>:<job name>'` (for a queue under a BullMQ
   * prefix of its own, not `bull`: `':<prefix>:<queue>:<job name>'`, the prefix's `%` and `:` written `%25` and `%3A`).
   * Give two queues the same scope to make their effects exclusive of each other.
   */
  scope?: string;
  /**
   * What must be equal between two deliveries of one key: `'data'` (default, the whole data), a list of top-level
   * fields, a function of the data, or `false` (not compared). A delivery with a different fingerprint fails with
   * `IdempotencyKeyMismatchError` and nothing runs.
   */
  fingerprint?: IdempotencyFingerprint<DataType>;
  /** Name of the store to use, from `forRoot({ idempotency: { stores } })`. Default: the default store (Redis). */
  store?: string;
  /**
   * Runs the handler inside a transaction of the store (a SQL store) and completes the record in that same
   * transaction: the handler's writes and the record commit together or not at all. The handler reads the transaction
   * from `idempotencyOf(job).transaction`. Default `false`.
   */
  transactional?: boolean;
}

/** The `idempotency` part of the module options. */
export interface IdempotencyModuleOptions {
  /**
   * The store used when `@IdempotencyKey` names none. Default: a `RedisIdempotencyStore` on the lock connection and
   * prefix.
   */
  store?: IdempotencyStore;
  /** Stores `@IdempotencyKey({ store: name })` can pick, e.g. `{ sql: new PostgresIdempotencyStore({ pool }) }`. */
  stores?: Readonly<Record<string, IdempotencyStore>>;
  /** Defaults of every `@IdempotencyKey` option. */
  defaults?: Partial<IdempotencyDefaults>;
}
