import type { Job } from 'bullmq';
import { digestOfDeduplicationId } from '../redis/keys.js';
import { markedDigest } from './slot-set.enqueue-lock.js';

/**
 * The digest of the enqueue lock a job took when it was added through the library: from its BullMQ deduplication id
 * (a deduplication-key lock) or the library's marker in its options (a slot-set lock). `undefined` for a job added
 * without the library.
 */
export function lockedDigest(job: Pick<Job<unknown, unknown>, 'deduplicationId' | 'opts'>): string | undefined {
  return digestOfDeduplicationId(job.deduplicationId) ?? markedDigest(job.opts);
}

/** Which enqueue lock a job took when it was added through the library, by the evidence it carries. */
export type LockedBy = 'deduplication' | 'slot-set';

/**
 * Which kind of enqueue lock a job took at enqueue: BullMQ's deduplication key (its deduplication id is the library's)
 * or a slot set (the library's marker in its options); `undefined` for a job added without the library. Options changed
 * since (`lockLimit`, `uniqueAcross: 'queues'`, `until_expired`) may have moved its digest to the other kind: the job
 * still releases the kind it took.
 */
export function lockedBy(job: Pick<Job, 'deduplicationId' | 'opts'>): LockedBy | undefined {
  if (digestOfDeduplicationId(job.deduplicationId) !== undefined) return 'deduplication';
  return markedDigest(job.opts) === undefined ? undefined : 'slot-set';
}
