import type { UniqueJobDefinition, UniqueJobOptions } from '../interfaces/unique-job-options.interface.js';
import { requestWorkerGuard } from './worker.guard.js';
import { UNIQUE_JOB_METADATA } from './unique-jobs.constants.js';

/**
 * Makes the jobs of a `@Processor` unique. Records the options (validated at bootstrap) and asks for the processor to
 * be guarded; the job interceptor does the rest. Repeat it with `jobName` to give job names of one queue different
 * options, or pass a shared definition from `defineUniqueJob` (its `queue` must be the processor's).
 *
 * @example
 * ```ts
 * @Processor('payments')
 * @UniqueJob({ lock: 'until_executed', onConflict: 'reject', lockArgs: (data: { eventId: string }) => data.eventId })
 * export class SettlePaymentProcessor extends WorkerHost { … }
 * ```
 */
export function UniqueJob<DataType = unknown>(
  options: UniqueJobOptions<DataType> | UniqueJobDefinition<DataType>,
): ClassDecorator {
  return (target) => {
    const declared = (Reflect.getOwnMetadata(UNIQUE_JOB_METADATA, target) ?? []) as unknown[];
    // Decorators apply bottom-up; keep source order so messages say "#1" for the topmost.
    Reflect.defineMetadata(UNIQUE_JOB_METADATA, [options, ...declared], target);
    requestWorkerGuard(target as unknown as abstract new (...args: never[]) => unknown);
  };
}
