import { DelayedError, RateLimitError, UnrecoverableError, WaitingChildrenError, WaitingError, type Job } from 'bullmq';

/** Whether BullMQ will run the job again after this error (a retry, or a move back to delayed/waiting). */
export function willRunAgain(job: Job, error: unknown): boolean {
  if (error instanceof UnrecoverableError) return false;
  if (
    error instanceof DelayedError ||
    error instanceof WaitingError ||
    error instanceof WaitingChildrenError ||
    error instanceof RateLimitError
  ) {
    return true;
  }
  return job.attemptsMade + 1 < Math.max(job.opts.attempts ?? 1, 1);
}
