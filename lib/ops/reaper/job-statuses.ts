import type { Cluster, Redis } from 'ioredis';
import { markedDigestIn } from '../../locks/job-marker.js';
import { readParkerStanding, standingOf, type JobStanding } from '../../redis/job-standing.js';
import { bullKeys } from '../../redis/keys.js';
import type { ReaperPass } from './reaper-pass.js';

/** Where a lock owner's job stands, as the reaper reads it from BullMQ's job hash. */
export type JobStatus = JobStanding | 'another';

/** What a job must be, besides live, to be a lock owner's: see {@link jobStatus}. */
export interface OwnerCheck {
  /** A slot-set lock's digest: a job whose marker names another digest is `'another'`. */
  readonly digest?: string;
  /** The creation time an idempotency record names: a job created at another time is `'gone'`. */
  readonly createdAt?: string;
  /**
   * A parked run-time slot's digest (neither of the others then applies): a live job that did not park it is
   * `'another'` (`readParkerStanding`).
   */
  readonly parkedIn?: string;
}

/**
 * A BullMQ job's status from its hash (`standingOf`), as the owner `check` describes it: with a digest (a slot-set
 * lock's), a job whose marker names another digest is `'another'`: its id was reused by a job that does not own this
 * lock; with a creation time (an idempotency record's), a job created at another time is `'gone'`: the record's job
 * was removed and its custom id given to a later job; for a parked run-time slot, a job that did not park it is
 * `'another'` (its id given to a new job after the parker was removed).
 */
export async function jobStatus(client: Redis | Cluster, jobKey: string, check: OwnerCheck = {}): Promise<JobStatus> {
  const { digest, createdAt, parkedIn } = check;
  if (parkedIn !== undefined) return readParkerStanding(client, jobKey, parkedIn);
  const [timestamp, finishedOn, opts] = await client.hmget(jobKey, 'timestamp', 'finishedOn', 'opts');
  const standing = standingOf(timestamp, finishedOn);
  if (standing === 'gone' || (createdAt !== undefined && Number(timestamp) !== Number(createdAt))) return 'gone';
  if (digest !== undefined && markedDigestIn(opts) !== digest) return 'another';
  return standing;
}

/**
 * The status of a lock owner's job in every queue it may live in (`queues`: those its owner names, when it names them;
 * none: its job is gone). A queue found only by discovery
 * (neither this application's nor in the library's registry) whose keys this application's Redis user may not read
 * (ACL: another application's queue on a shared server) holds none of its jobs; a refusal on one of this
 * application's queues, or while the registry cannot say which queues are (unreadable, full), is an error (the owner is
 * kept).
 */
export async function ownerStatuses(
  client: Redis | Cluster,
  pass: ReaperPass,
  jobId: string,
  check: OwnerCheck,
  queues?: readonly string[],
): Promise<JobStatus[]> {
  const names = queues ?? (await pass.queueNames());
  const answers = await Promise.allSettled(names.map((queue) => jobStatus(client, bullKeys.job(queue, jobId), check)));
  const refused = (answer: PromiseSettledResult<JobStatus>) =>
    answer.status === 'rejected' && String((answer.reason as Error | undefined)?.message).startsWith('NOPERM');
  const vouched = answers.some(refused) ? await pass.vouchedNames() : 'all';
  return answers.map((answer, i) => {
    if (answer.status === 'fulfilled') return answer.value;
    if (refused(answer) && vouched !== 'all' && !vouched.has(names[i])) return 'gone';
    throw answer.reason;
  });
}
