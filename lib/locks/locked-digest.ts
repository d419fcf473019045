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
