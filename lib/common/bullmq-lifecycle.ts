import { RATE_LIMIT_ERROR, type Job } from 'bullmq';

/**
 * What BullMQ does with a job whose handler just threw:
 * - `'runs-again'`: the attempt does not count. The handler moved the job itself before throwing (`moveToDelayed` +
 *   `DelayedError`, `moveToWait`, `moveToWaitingChildren`: the job is no longer active), or asked for a rate limit
 *   (BullMQ's `RATE_LIMIT_ERROR`).
 * - `'retries'` or `'fails'`: BullMQ's own rule decides, read from BullMQ (`Job#shouldRetryJob`: attempts,
 *   the worker's `maxStartedAttempts`, a backoff strategy answering -1, errors it recognises by name such as
 *   `UnrecoverableError`). A BullMQ without that method answers `'retries'` (the caller then keeps nothing final).
 *
 * Asked before BullMQ moves the job, for decisions that cannot wait for the worker's `failed` event. Costs one Redis
 * call (the job's state), and a custom backoff strategy is called once more than BullMQ calls it.
 */
export async function attemptOutcome(
  job: Job<unknown, unknown>,
  error: unknown,
): Promise<'runs-again' | 'retries' | 'fails'> {
  if (error instanceof Error && error.message === RATE_LIMIT_ERROR) return 'runs-again';
  if ((await job.getState()) !== 'active') return 'runs-again';
  const shouldRetryJob = (job as unknown as { shouldRetryJob?: (err: unknown) => Promise<[boolean, number]> })
    .shouldRetryJob;
  if (typeof shouldRetryJob !== 'function') return 'retries';
  const [retry] = await shouldRetryJob.call(job, error);
  return retry ? 'retries' : 'fails';
}

/**
 * Whether a job's start may not be its first: a retry, a stalled job recovered, or a job brought back from `failed` or
 * `completed` (BullMQ counts every end in `attemptsMade`, unless a `retry` resets it along with `attemptsStarted`).
 */
export function isRestart(job: Job<unknown, unknown>): boolean {
  return job.attemptsMade > 0 || job.attemptsStarted > 1 || job.stalledCounter > 0;
}
