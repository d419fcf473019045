import { UnrecoverableError, type Job } from 'bullmq';
import type { LoggerLike } from '../common/logger.js';
import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';
import type { JobDefinition } from '../options/job-definitions.js';

/**
 * Jobs that reach a worker without an enqueue lock. For a lock type that takes one at enqueue, such a job was added by a
 * producer the library does not guard (a process whose `UniqueJobsModule.forRoot()` has no `jobs` definition of it and
 * loads no processor of it, a `FlowProducer`, a job scheduler, a `Queue` never passed to `guardQueue`, BullMQ's
 * `Job.create` or `Queue#addJob` on any queue, BullMQ itself):
 * its duplicates were never refused, and nothing else would tell. Said once per job definition (a bounded set: the
 * definitions are the application's).
 */
export class UnlockedArrivals {
  private readonly warned = new WeakSet<JobDefinition>();

  constructor(private readonly logger: LoggerLike) {}

  /**
   * The digest of a job that took no enqueue lock (a run-time lock only, or a job added without the library). The data
   * is what the producer stored, so it is the digest the producer computed. Lock arguments that cannot be hashed will
   * never be hashable: the job fails for good instead of retrying.
   */
  digestOf(definition: JobDefinition, job: Job<unknown, unknown>): string {
    if (definition.enqueueLock && !this.warned.has(definition)) {
      this.warned.add(definition);
      this.logger.warn(
        `Job ${job.id} ("${job.name}" on queue "${job.queueName}") reached the worker without the enqueue lock its ` +
          `${definition.options.lock} lock takes: it was added by a producer the library does not guard (a process ` +
          `whose UniqueJobsModule.forRoot() has no \`jobs\` definition of it and loads no processor of it, a ` +
          `FlowProducer, a job scheduler, a Queue not passed to guardQueue, BullMQ's Job.create or Queue#addJob, ` +
          `which bypass even a guarded queue), so its duplicates were not refused at ` +
          `enqueue. Pass \`jobs: [...]\` to forRoot() in every process that adds it. (A job added before the ` +
          `application's init() guarded its queues — from a provider's constructor —, while the module was disabled, ` +
          `or under a lock type without an enqueue lock before a deploy changed it, arrives this way too.) Said once ` +
          `per job definition`,
      );
    }
    try {
      return definition.digestOf(job);
    } catch (error) {
      if (error instanceof UnserializableLockArgsError) throw new UnrecoverableError(error.message);
      throw error;
    }
  }
}
