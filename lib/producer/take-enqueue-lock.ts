import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { EnqueueRequest, Taken } from '../locks/enqueue-lock.js';
import type { JobDefinition } from '../options/job-definitions.js';

/** Takes a definition's enqueue lock for a new job and adds it, reporting the `locked` event. */
export async function takeEnqueueLock(
  definition: JobDefinition,
  request: EnqueueRequest,
  events: UniqueJobsEvents,
): Promise<Taken> {
  const taken = await definition.enqueueLock!.take(request);
  if ('job' in taken) reportLocked(definition, request, events);
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
