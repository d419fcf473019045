import type { DeadSetEntry } from '../../../dead-set/dead-set-entry.interface.js';
import type { IdempotencyRecord } from '../../../idempotency/idempotency-store.interface.js';
import type { StoredLookupMatch } from '../../../idempotency/stored-key.js';
import type { HeldLock } from '../../inspection/lock-inspection.interface.js';

/** One point of a job's history. */
export interface AdminJobEvent {
  /** When (ms since epoch). */
  at: number;
  /** What happened: `added`, `delayed until`, `started`, `completed`, `failed`. */
  event: string;
  /** More words (a failure reason): user data, escaped when rendered. */
  detail?: string;
}

/** An owner job of a lock as the admin shows it. */
export interface AdminJobView {
  queue: string | undefined;
  id: string;
  /** `false` when no job with this id exists in the inspected queues (an orphaned lock). */
  found: boolean;
  name?: string;
  /** BullMQ's state: waiting, active, delayed, completed, failed, … */
  state?: string;
  data?: unknown;
  opts?: unknown;
  attemptsMade?: number;
  failedReason?: string;
  returnValue?: unknown;
  /** The job's timeline, oldest first. */
  timeline: AdminJobEvent[];
  /** The job's last log lines (`job.log`). */
  logs: string[];
}

/**
 * A lock opened in the admin: its keys, its owner jobs and the duplicates rejected under its digest. Bounded whatever
 * the data: at most 20 owners a key and 20 owner jobs, and a `limit` of rejected duplicates, the rest counted.
 */
export interface AdminLockDetail {
  digest: string;
  /** Every key of the digest (enqueue and run-time), each with at most 20 owners (`moreOwners`: the others). */
  locks: HeldLock[];
  /** The jobs holding it, loaded whole (data, options, last 50 log lines, history): at most 20. */
  jobs: AdminJobView[];
  /**
   * Holders of the digest's keys whose jobs are not in {@link jobs} (counted per key: a job holding two keys of the
   * digest counts in each); absent when every holder is there.
   */
  moreOwners?: number;
  /** Dead-set entries of this digest, newest first: the newest `limit` (default 20) of {@link rejectedTotal}. */
  rejected: DeadSetEntry[];
  /** How many entries of this digest the searched part of the dead set holds. */
  rejectedTotal: number;
  /** How many of the newest dead-set entries were searched: at most 2000 (fewer when the dead set holds fewer). */
  rejectedSearched: number;
}

/** A page of the dead set. */
export interface AdminDeadSetPage {
  entries: DeadSetEntry[];
  offset: number;
  limit: number;
  total: number;
}

/** An idempotency record as the admin shows it (the owner token, a capability, is left out). */
export type AdminIdempotencyRecord = Omit<IdempotencyRecord, 'owner'>;

/** The answer to an idempotency key lookup. */
export interface AdminKeyLookup {
  store: string;
  /** The scope as looked up: as stored (`normalizeIdempotencyScope`; an ordinary scope is unchanged). */
  scope: string;
  /** The key as looked up: as stored (`normalizeIdempotencyKey`: long, `sha256:`-prefixed or unstorable keys hashed). */
  key: string;
  /** The live record, or `null` when the key has none. */
  record: AdminIdempotencyRecord | null;
  /**
   * How the text given matched the record (absent when none was found): `'normalized'`, as `@IdempotencyKey` stores
   * it; `'stored form'`, a pasted stored hashed form (`sha256:<hex>`) found as it is.
   */
  matchedAs?: StoredLookupMatch;
}

/** What retrying a dead-set entry did. */
export type AdminRetryResult =
  | { status: 'enqueued'; jobId: string | undefined }
  | { status: 'duplicate'; existingJobId: string | undefined; strategy: string };
