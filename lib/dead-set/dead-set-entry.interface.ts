import type { JobsOptions } from 'bullmq';
import type { ConflictSide } from '../interfaces/unique-job-options.interface.js';

/**
 * A rejected duplicate, kept in the dead set: inspectable, retryable, deletable.
 *
 * An entry whose JSON would be over `deadSet.maxEntryBytes` is kept **truncated**: without `data` and `opts`, with
 * `truncated: true`, the size it would have had (`originalBytes`) and the sha256 of what was dropped
 * (`payloadSha256`); if that is still over, its longest strings (reason, job ids, job name, queue) are cut, each ending
 * with `…`. It can be listed and deleted, not retried (`TruncatedDeadSetEntryError`).
 */
export interface DeadSetEntry {
  /** Entry id. */
  id: string;
  /** The queue the duplicate was meant for. */
  queue: string;
  /**
   * The BullMQ key prefix of that queue (`bull` unless the queue was given another): a retry goes to the queue of this
   * name and prefix only. Absent on entries kept by versions before it was recorded (a retry then goes to the latest
   * guarded queue of the name).
   */
  bullPrefix?: string;
  /** The duplicate's job name. */
  jobName: string;
  /** The job's data, as it was when rejected. Absent when the entry is `truncated`. */
  data?: unknown;
  /** The job's options (the library's own fields removed). Absent when the entry is `truncated`. */
  opts?: JobsOptions;
  /** The lock digest the duplicate and the holder share. */
  digest: string;
  /** The job that held the lock. */
  existingJobId: string | undefined;
  /** The rejected job's id (server side; at enqueue the duplicate never became a job). */
  jobId?: string;
  /** Where it was rejected. */
  side: ConflictSide;
  /** Why, in words. */
  reason: string;
  /** When (ms since epoch). */
  rejectedAt: number;
  /**
   * `true` when the entry was stored without its payload (`data` and `opts`) because its JSON was over
   * `deadSet.maxEntryBytes`; absent otherwise.
   */
  truncated?: true;
  /** On a truncated entry: the size in bytes (UTF-8) the entry's JSON had with its payload. */
  originalBytes?: number;
  /** On a truncated entry: the sha256 (lowercase hex) of the JSON of the dropped payload, `{"data":…,"opts":…}`. */
  payloadSha256?: string;
}

/** What a conflict strategy gives the dead set: an entry with its payload, before it gets an id and a time. */
export type NewDeadSetEntry = Omit<
  DeadSetEntry,
  'id' | 'rejectedAt' | 'truncated' | 'originalBytes' | 'payloadSha256' | 'opts'
> & {
  /** The job options to keep with the entry (a retry enqueues with them), without the library's own fields. */
  opts: JobsOptions;
};

/** An entry that still has its payload: the only kind `retry` enqueues again. */
export type RetryableDeadSetEntry = DeadSetEntry & {
  /** The job's options (the library's own fields removed): the retry enqueues with them. */
  opts: JobsOptions;
  /** Never set: a truncated entry has lost its payload and cannot be retried. */
  truncated?: undefined;
};
