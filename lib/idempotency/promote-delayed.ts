import { Job, type MinimalQueue } from 'bullmq';

/** Promotions sent at once by {@link promoteAll} (the rest follow as those are answered). */
const PROMOTE_CONCURRENCY = 16;

/** Moves a delayed job to waiting, through its queue or worker (nothing happens if it is no longer delayed). */
export async function promote(queue: MinimalQueue, jobId: string): Promise<void> {
  try {
    await new Job(queue, '', undefined, {}, jobId).promote();
  } catch {
    // Not delayed (any more): it already runs, or was promoted by itself.
  }
}

/** Promotes delayed jobs, {@link PROMOTE_CONCURRENCY} at a time. Never rejects. */
export async function promoteAll(jobs: { worker: MinimalQueue; jobId: string }[]): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < jobs.length) {
      const { worker, jobId } = jobs[next++];
      await promote(worker, jobId);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PROMOTE_CONCURRENCY, jobs.length) }, lane));
}
