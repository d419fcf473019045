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
  /**
   * The queue the job was found in; when not found, the queue the lock names for it (`undefined` when the lock does
   * not say: every inspected queue was searched; or a run-time lock's owner names a queue the admin does not know).
   */
  queue: string | undefined;
  /** The job's id, as the lock names its owner. */
  id: string;
  /**
   * Not found because a run-time lock's owner names a queue the admin neither inspects nor finds in the library's queue
   * registry: that queue's tag (`LockOwner.queueTag`). Its job may be alive there: the lock is not known to be an orphan.
   */
  queueTag?: string;
  /**
   * `false` when no job with this id exists in the inspected queues (an orphaned lock), or in the queue a run-time
   * lock's owner names (a queue the admin does not inspect: its job may live there).
   */
  found: boolean;
  /** The job's name (found jobs only, as are the fields below up to `returnValue`). */
  name?: string;
  /** BullMQ's state: waiting, active, delayed, completed, failed, … */
  state?: string;
  /** The job's data: user data, escaped when rendered. */
  data?: unknown;
  /** The job's BullMQ options, as stored (the library's marker included). */
  opts?: unknown;
  /** Attempts BullMQ has started and ended so far (`job.attemptsMade`). */
  attemptsMade?: number;
  /** The error message of the last failed attempt, when it has one. */
  failedReason?: string;
  /** What the handler returned, when the job completed with a value. */
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
  /** The digest opened (`v1:` + 64 hex digits). */
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
  /** The entries of the page, newest first. */
  entries: DeadSetEntry[];
  /** How many newer entries come before the page (as requested). */
  offset: number;
  /** The page size requested: `entries` holds at most that many. */
  limit: number;
  /** How many entries the dead set holds. */
  total: number;
}

/** An idempotency record as the admin shows it (the owner token, a capability, is left out). */
export type AdminIdempotencyRecord = Omit<IdempotencyRecord, 'owner'>;

/** The answer to an idempotency key lookup. */
export interface AdminKeyLookup {
  /** Name of the idempotency store queried (`'default'` for the module's default store). */
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
  | {
      /**
       * The entry was taken out of the dead set and enqueued again: `enqueued`, added; `duplicate`, its lock is held
       * again and its conflict strategy handled it.
       */
      status: 'enqueued';
      /** Id of the job added. */
      jobId: string | undefined;
    }
  | {
      status: 'duplicate';
      /** Id of the job holding the lock. */
      existingJobId: string | undefined;
      /** The strategy that handled the duplicate (a `reject` keeps it in the dead set again as a new entry). */
      strategy: string;
    };
