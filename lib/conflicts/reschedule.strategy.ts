import { DelayedError } from 'bullmq';
import type { ConflictStrategy, ConflictTools, ServerConflict } from './conflict-strategy.interface.js';

/**
 * In the worker: moves the job back to delayed for `rescheduleIn` ms without using a retry attempt, at most
 * `maxReschedules` times; after that `reject` applies (the job is kept in the dead set).
 */
export class RescheduleStrategy implements ConflictStrategy {
  readonly name = 'reschedule';
  readonly sides = ['server'] as const;

  async onServerConflict(conflict: ServerConflict, tools: ConflictTools): Promise<unknown> {
    const { job, definition } = conflict;
    const reschedules = await tools.countReschedule(job);
    if (reschedules > definition.options.maxReschedules) {
      tools.logger.warn(
        `Job ${job.id} was rescheduled ${definition.options.maxReschedules} times (maxReschedules); falling back to reject`,
      );
      return tools.strategy('reject').onServerConflict!(conflict, tools);
    }
    await job.moveToDelayed(Date.now() + definition.options.rescheduleIn, conflict.token);
    tools.events.emit({
      type: 'rescheduled',
      queue: definition.queue,
      jobName: job.name,
      digest: conflict.digest,
      jobId: job.id!,
      delay: definition.options.rescheduleIn,
      reschedules,
    });
    throw new DelayedError(
      `Rescheduled: digest ${conflict.digest} is locked by job ${conflict.existingJobId ?? '(unknown)'}`,
    );
  }
}
