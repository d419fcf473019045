import { DelayedError, type Job } from 'bullmq';

/** A step job's data: its own fields, and the step BullMQ's step pattern stores in it. */
export type StepData = { id?: string; key?: string; step?: number };

/**
 * A step job's handler, in BullMQ's step pattern: step 1 stores step 2 in the job's data, moves the job to delayed for
 * `delayMs` and ends its attempt with `DelayedError` (awaiting `beforeThrow` first, when given); a later step runs
 * `next` (default: resolves `'done'`). Every run is pushed to `ran` as `<job id>:<step>`.
 */
export function stepHandler(
  ran: string[],
  options: {
    delayMs: number;
    beforeThrow?: () => Promise<unknown>;
    next?: (job: Job<StepData>) => Promise<unknown>;
  },
): (job: Job<StepData>) => Promise<unknown> {
  return async (job) => {
    const step = job.data.step ?? 1;
    ran.push(`${job.id}:${step}`);
    if (step === 1) {
      await job.updateData({ ...job.data, step: 2 });
      await job.moveToDelayed(Date.now() + options.delayMs, job.token);
      await options.beforeThrow?.();
      throw new DelayedError();
    }
    return options.next ? options.next(job) : 'done';
  };
}
