import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { AddFn, EnqueueRequest, Taken } from '../locks/enqueue-lock.js';
import type { JobDefinition } from '../options/job-definitions.js';

/**
 * Takes a definition's enqueue lock for a new job and adds it through the queue's own `add` (one call on the
 * deduplication path: the lock rides inside the add), reporting the `locked` event (not for an add answered by a job
 * that had the producer's `jobId` already: it took no lock; nor for one nobody watched when it began,
 * `request.reported`). A failed add gives the lock back.
 */
export async function takeEnqueueLock(
  definition: JobDefinition,
  request: EnqueueRequest,
  add: AddFn,
  events: UniqueJobsEvents,
): Promise<Taken> {
  const lock = definition.enqueueLock!;
  const prepared = await lock.prepare(request);
  if (!('opts' in prepared)) return prepared;
  let taken: Taken;
  try {
    taken = await lock.settle(await add(request.name, request.data, prepared.opts), request);
  } catch (error) {
    await lock.abandon(request);
    throw error;
  }
  // Only an add watched from its start: one begun unwatched did not ask whether its caller jobId existed (it may have
  // been answered by that job, taking no lock), and a subscriber that came meanwhile would be told of a lock not taken.
  if ('job' in taken && !taken.existed && request.reported) reportLocked(definition, request, events);
  return taken;
}

/** The `locked` event of an enqueue lock taken for a new job. */
export function reportLocked(
  definition: JobDefinition,
  { name, digest, jobId }: Pick<EnqueueRequest, 'name' | 'digest' | 'jobId'>,
  events: UniqueJobsEvents,
): void {
  events.emit({ type: 'locked', lock: 'enqueue', queue: definition.queue, jobName: name, digest, jobId });
}
