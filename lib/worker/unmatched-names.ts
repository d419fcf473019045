import type { Job } from 'bullmq';
import type { LoggerLike } from '../common/logger.js';
import { cut } from '../errors/thrown.js';
import type { JobDefinitions } from '../options/job-definitions.js';

/** Names reported at most, per process: job names are the producers' to choose. */
const MAX_REPORTED = 100;
/** A name's characters reported and remembered at most (a name is the producer's string). */
const MAX_NAME_LENGTH = 100;

/**
 * Jobs of a queue with unique job definitions that none of them covers: each runs without a lock, as intended for a
 * job that is not meant to be unique, and as a misspelt name (`queue.add('settle', …)` for a definition of
 * `settle-payment`) runs too, silently otherwise. Said once per queue and job name, for at most 100 names a process.
 */
export class UnmatchedNames {
  private readonly reported = new Map<string, Set<string>>();
  private count = 0;

  constructor(
    private readonly definitions: JobDefinitions,
    private readonly logger: LoggerLike,
  ) {}

  /** Notes a job that no unique job definition of its queue covers (reported the first time its name is met). */
  note(job: Job<unknown, unknown>): void {
    if (this.count >= MAX_REPORTED || !this.definitions.hasQueue(job.queueName)) return;
    // Remembered as shown, cut: what is kept stays bounded whatever names producers choose.
    const name = shown(job.name);
    let names = this.reported.get(job.queueName);
    if (names?.has(name)) return;
    if (!names) this.reported.set(job.queueName, (names = new Set()));
    names.add(name);
    this.count += 1;
    const defined = this.definitions
      .jobNamesOf(job.queueName)
      .map((jobName) => JSON.stringify(shown(jobName)))
      .join(', ');
    const last = this.count === MAX_REPORTED ? ` (${MAX_REPORTED} names reported: no more are)` : '';
    this.logger.warn(
      `Job ${job.id} (${JSON.stringify(name)} on queue "${job.queueName}") runs without a unique-job lock: no unique job ` +
        `definition of the queue covers its name (they name ${defined}). A misspelt job name looks the same; a job ` +
        `not meant to be unique can ignore this. Said once per queue and job name${last}`,
    );
  }
}

/** A name cut to its first 100 characters (`…` marks the cut). */
function shown(name: string): string {
  return cut(name, MAX_NAME_LENGTH + 1);
}
