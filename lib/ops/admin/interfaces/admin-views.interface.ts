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

/** A lock opened in the admin: its keys, its owner jobs and the duplicates rejected under its digest. */
export interface AdminLockDetail {
  digest: string;
  /** Every key of the digest (enqueue and run-time). */
  locks: HeldLock[];
  /** The jobs holding it. */
  jobs: AdminJobView[];
  /** Dead-set entries of this digest (newest first, from the newest 2000 entries). */
  rejected: DeadSetEntry[];
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
