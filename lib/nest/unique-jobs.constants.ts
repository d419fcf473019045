/** Metadata key under which `@UniqueJob` records its options on a processor class. */
export const UNIQUE_JOB_METADATA = 'nestjs-unique-jobs:unique-job';

/** `@nestjs/bullmq`'s metadata key for `@Processor` (not exported by the package). */
export const PROCESSOR_METADATA = 'bullmq:processor_metadata';

/** Injection token of the Redis client the library uses. */
export const UNIQUE_JOBS_REDIS = Symbol('UNIQUE_JOBS_REDIS');

/** Injection token of the job definitions registry. */
export const UNIQUE_JOBS_DEFINITIONS = Symbol('UNIQUE_JOBS_DEFINITIONS');

/** Injection token of the strategy registry. */
export const UNIQUE_JOBS_STRATEGIES = Symbol('UNIQUE_JOBS_STRATEGIES');

/** Property of a processor instance through which the worker guard is injected (and installs itself). */
export const WORKER_GUARD_PROPERTY = '__uniqueJobsWorkerGuard';
/**
 * The token a decorated processor asks the worker guard by. Nest names it in the error it raises when no module
 * provides it, so it says what is missing: `UniqueJobsModule.forRoot()` (or `forRootAsync()`) imported once.
 */
export const WORKER_GUARD_TOKEN = 'UniqueJobsModule.forRoot() or forRootAsync(), imported once in the application';

/** Metadata key under which `@IdempotencyKey` records its options on a processor class. */
export const IDEMPOTENCY_KEY_METADATA = 'nestjs-unique-jobs:idempotency-key';

/** Injection token of the idempotency definitions registry. */
export const UNIQUE_JOBS_IDEMPOTENCY = Symbol('UNIQUE_JOBS_IDEMPOTENCY');

/** Injection token of the lock storage (scripts, lock operations, key names). */
export const UNIQUE_JOBS_LOCKS = Symbol('UNIQUE_JOBS_LOCKS');
