import { UnrecoverableError } from 'bullmq';
import { describeThrown } from '../errors/thrown.js';
import type { JobRun, JobRunDeps } from './job-run.js';

/**
 * A failed attempt whose retry would wait beside `holder`, a job of the digest enqueued while it ran: it is not
 * retried (the error makes BullMQ fail it for good), and `holder` does the work. Reported as a duplicate.
 */
export function superseded(
  run: JobRun,
  error: unknown,
  holder: string | undefined,
  { events }: Pick<JobRunDeps, 'events'>,
): UnrecoverableError {
  const { job, digest } = run;
  const reason = describeThrown(error).message;
  events.emit({
    type: 'duplicate',
    side: 'server',
    strategy: 'superseded',
    queue: job.queueName,
    jobName: job.name,
    digest,
    jobId: job.id,
    existingJobId: holder,
  });
  return new UnrecoverableError(
    `${reason} — not retried: job ${holder ?? '(unknown)'} of the same digest ${digest} was enqueued while this attempt ran and holds its lock; it runs instead`,
  );
}
