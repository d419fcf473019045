import type { Cluster, Redis } from 'ioredis';

/** Where a BullMQ job stands, as its hash says: `'gone'` (no hash), `'finished'` (completed or failed), else `'live'`. */
export type JobStanding = 'live' | 'finished' | 'gone';

/**
 * A job's standing from two fields of its hash, as BullMQ writes them: every job has a `timestamp`; BullMQ sets
 * `finishedOn` when it moves the job to completed or failed, and clears it in the script that makes a retried job
 * deliverable again. The one reading of the rule (the worker's stale-slot check, the lock store, the reaper).
 */
export function standingOf(timestamp: string | null, finishedOn: string | null): JobStanding {
  return timestamp === null ? 'gone' : finishedOn === null ? 'live' : 'finished';
}

/** Reads a job's standing (one HMGET of its hash, `jobKey` from `bullKeys.job`). */
export async function readJobStanding(client: Redis | Cluster, jobKey: string): Promise<JobStanding> {
  const [timestamp, finishedOn] = await client.hmget(jobKey, 'timestamp', 'finishedOn');
  return standingOf(timestamp, finishedOn);
}
