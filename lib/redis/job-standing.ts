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

/**
 * Where the job a parked run-time lock slot names stands (its owner is the job's queue and id): as {@link standingOf},
 * and `'another'` for a live job whose hash counts no step (`steps`: the library's `STEPS_FIELD`, which every park
 * writes before it parks the slot): its id was given to a job that did not park the slot (the parker removed and its
 * custom id added again: BullMQ's remove-and-add to reschedule a job).
 */
export function parkerStandingOf(
  timestamp: string | null,
  finishedOn: string | null,
  steps: string | null,
): JobStanding | 'another' {
  const standing = standingOf(timestamp, finishedOn);
  return standing === 'live' && steps === null ? 'another' : standing;
}

/** Reads a job's standing (one HMGET of its hash, `jobKey` from `bullKeys.job`). */
export async function readJobStanding(client: Redis | Cluster, jobKey: string): Promise<JobStanding> {
  const [timestamp, finishedOn] = await client.hmget(jobKey, 'timestamp', 'finishedOn');
  return standingOf(timestamp, finishedOn);
}
