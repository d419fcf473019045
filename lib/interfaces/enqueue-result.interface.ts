import type { Job } from 'bullmq';

/**
 * A job that was added to the queue (or replaced the job that held its lock). `ResultType` types what the job returns
 * (`job.returnvalue`, `job.waitUntilFinished()`); the library cannot know it: `unknown` unless the caller names it
 * (`uniqueJobs.enqueue<Order, Receipt>(…)`).
 */
export interface EnqueuedResult<DataType = unknown, ResultType = unknown> {
  /** Tells the two results apart: the job was added. */
  status: 'enqueued';
  /**
   * The job added; or, when the `jobId` you passed already exists, a handle with that id and the data you passed
   * (BullMQ's own id deduplication, answered before any lock: nothing was added).
   */
  job: Job<DataType, ResultType>;
  /** The digest the job is locked under, when it has an enqueue lock. */
  digest?: string;
  /**
   * Id of the job this one replaced (`replace` strategy). When other producers replaced the same digest at the same
   * time, this call may have removed several holders on its way: this names the last; a `replaced` event names each.
   */
  replacedJobId?: string;
}

/** A job that was not added because another job holds its lock. */
export interface DuplicateResult {
  /** Tells the two results apart: the job was not added (its conflict strategy handled it). */
  status: 'duplicate';
  /**
   * Id of the job that holds the lock; `undefined` when the holder could not be named: it ended (its lock gone) between
   * refusing this job and the read of its id, or an earlier build's lock names none. The lock may be free now:
   * enqueue again if the job must run.
   */
  existingJobId: string | undefined;
  /** The strategy that handled the duplicate. */
  strategy: string;
  /** The digest the duplicate was locked out of (`v1:` + 64 hex digits). */
  digest: string;
  /** The dead-set entry holding the duplicate (`reject` strategy). */
  deadSetEntryId?: string;
}

/** What the explicit producer API returns: the caller can always tell what happened. */
export type EnqueueResult<DataType = unknown, ResultType = unknown> =
  EnqueuedResult<DataType, ResultType> | DuplicateResult;
