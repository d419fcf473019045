import type { Job } from 'bullmq';
import { digestOfDeduplicationId } from '../redis/keys.js';
import { markedDigest } from './job-marker.js';

/** Which enqueue lock a job took when it was added through the library, by the evidence it carries. */
export type LockedBy = 'deduplication' | 'slot-set';

/** The enqueue lock a job took when it was added through the library: its kind and its digest. */
export interface LockedAs {
  readonly by: LockedBy;
  readonly digest: string;
}

/**
 * The enqueue lock a job took at enqueue, read from the job: BullMQ's deduplication key (its deduplication id is the
 * library's) or a slot set (the library's marker in its options); `undefined` for a job added without the library.
 * Options changed since (`lockLimit`, `uniqueAcross: 'queues'`, `until_expired`) may have moved its digest to the other
 * kind: the job still releases the kind it took.
 */
export function lockedAs(job: Pick<Job<unknown, unknown>, 'deduplicationId' | 'opts'>): LockedAs | undefined {
  const deduplicated = digestOfDeduplicationId(job.deduplicationId);
  if (deduplicated !== undefined) return { by: 'deduplication', digest: deduplicated };
  const marked = markedDigest(job.opts);
  return marked === undefined ? undefined : { by: 'slot-set', digest: marked };
}
