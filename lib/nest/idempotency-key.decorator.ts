import type {
  IdempotencyKeyFunction,
  IdempotencyKeyOptions,
} from '../idempotency/idempotency-key-options.interface.js';
import { requestWorkerGuard } from './worker.guard.js';
import { IDEMPOTENCY_KEY_METADATA } from './unique-jobs.constants.js';

/**
 * Makes the effect of a `@Processor`'s jobs happen once per key, however often a job is delivered: the handler runs
 * only after an atomic claim of the key, a completed key is replayed (the job completes with the stored return
 * value), and a key in progress elsewhere waits. The key comes from the job's domain data, never from its id.
 * Records the options (validated at bootstrap); the job interceptor does the rest. Composes with `@UniqueJob`. Repeat
 * it with `jobName` to give job names of one queue different keys.
 *
 * @example
 * ```ts
 * @Processor('payments')
 * @IdempotencyKey({ key: (job: IdempotencyJob<{ eventId: string }>) => job.data.eventId, store: 'sql', transactional: true })
 * export class SettlePaymentProcessor extends WorkerHost {
 *   async process(job: Job<{ eventId: string }>) {
 *     const { transaction } = idempotencyOf<PoolClient>(job);
 *     await transaction!.query('UPDATE payments SET settled = true WHERE event_id = $1', [job.data.eventId]);
 *   }
 * }
 * ```
 */
export function IdempotencyKey<DataType = unknown>(
  keyOrOptions: IdempotencyKeyFunction<DataType> | IdempotencyKeyOptions<DataType>,
): ClassDecorator {
  const options = typeof keyOrOptions === 'function' ? { key: keyOrOptions } : keyOrOptions;
  return (target) => {
    const declared = (Reflect.getOwnMetadata(IDEMPOTENCY_KEY_METADATA, target) ?? []) as unknown[];
    // Decorators apply bottom-up; keep source order so messages say "#1" for the topmost.
    Reflect.defineMetadata(IDEMPOTENCY_KEY_METADATA, [options, ...declared], target);
    requestWorkerGuard(target as unknown as abstract new (...args: never[]) => unknown);
  };
}
