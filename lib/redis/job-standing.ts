import type { Cluster, Redis } from 'ioredis';
import { PARKED_FIELD, STEPS_FIELD } from './keys.js';

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

/**
 * Reads where the job a run-time lock slot parked under `digest` names stands (its owner is the job's queue and id;
 * one HMGET of its hash): as {@link standingOf}, and `'another'` for a live job that did not park it, its id given to a
 * new job after the parker was removed (BullMQ's remove-and-add to reschedule a job). Every park first names its digest
 * in the job's hash (`PARKED_FIELD`); a hash that names none but counts steps (`STEPS_FIELD`) was parked by a build
 * before that field, and is taken for the parker. The one reading of the rule (the take's stale check, the reaper).
 */
export async function readParkerStanding(
  client: Redis | Cluster,
  jobKey: string,
  digest: string,
): Promise<JobStanding | 'another'> {
  const [timestamp, finishedOn, steps, parkedIn] = await client.hmget(
    jobKey,
    'timestamp',
    'finishedOn',
    STEPS_FIELD,
    PARKED_FIELD,
  );
  const standing = standingOf(timestamp, finishedOn);
  if (standing !== 'live') return standing;
  const parker = parkedIn !== null ? parkedIn === digest : steps !== null;
  return parker ? 'live' : 'another';
}
