import type { JobsOptions } from 'bullmq';
import type { ConflictSide } from '../interfaces/conflict-strategy.interface.js';

/** A rejected duplicate, kept in the dead set: inspectable, retryable, deletable. */
export interface DeadSetEntry {
  /** Entry id. */
  id: string;
  queue: string;
  jobName: string;
  /** The job's data, as it was when rejected. */
  data: unknown;
  /** The job's options (the library's own fields removed). */
  opts: JobsOptions;
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
}
