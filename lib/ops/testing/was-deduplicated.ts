import type { Job } from 'bullmq';
import type { EnqueueResult } from '../../interfaces/enqueue-result.interface.js';

/**
 * Whether an enqueue was a duplicate. Give it the result of `UniqueJobsService.enqueue` (`status: 'duplicate'`), or the
 * job `queue.add` returned together with the `jobId` you asked for: with the `log` strategy, `queue.add` returns a
 * handle built locally with the id of the job that holds the lock (not yours) and the data you passed, as BullMQ's own
 * deduplication does.
 */
export function wasDeduplicated(result: EnqueueResult): boolean;
export function wasDeduplicated(job: Pick<Job<unknown, unknown>, 'id'>, requestedJobId: string): boolean;
export function wasDeduplicated(
  result: EnqueueResult | Pick<Job<unknown, unknown>, 'id'>,
  requestedJobId?: string,
): boolean {
  if ('status' in result) return result.status === 'duplicate';
  if (requestedJobId === undefined) {
    throw new TypeError(
      'wasDeduplicated(job) needs the jobId you passed to queue.add (or pass the result of UniqueJobsService.enqueue)',
    );
  }
  return result.id !== requestedJobId;
}
