/**
 * nestjs-unique-jobs: unique jobs (sidekiq-unique-jobs semantics) for NestJS + BullMQ.
 * @packageDocumentation
 */
export { UniqueJobsModule } from './unique-jobs.module.js';
export { UniqueJobsService } from './unique-jobs.service.js';
export { UniqueJob } from './decorators/unique-job.decorator.js';
export { IdempotencyKey } from './decorators/idempotency-key.decorator.js';
export { idempotencyOf, currentIdempotency } from './idempotency/idempotency-context.js';
export type { IdempotencyContext } from './idempotency/idempotency-context.js';
export { RedisIdempotencyStore } from './idempotency/stores/redis-idempotency.store.js';
export type { RedisIdempotencyStoreOptions } from './idempotency/stores/redis-idempotency.store.js';
export { PostgresIdempotencyStore } from './idempotency/stores/postgres-idempotency.store.js';
export type {
  PostgresIdempotencyStoreOptions,
  PgClientLike,
  PgPoolLike,
  PgQueryable,
} from './idempotency/stores/postgres-idempotency.store.js';
export { SqliteIdempotencyStore } from './idempotency/stores/sqlite-idempotency.store.js';
export type {
  SqliteIdempotencyStoreOptions,
  SqliteDatabaseLike,
  SqliteStatementLike,
} from './idempotency/stores/sqlite-idempotency.store.js';
export { DEFAULT_IDEMPOTENCY_OPTIONS, MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency/idempotency-options.js';
export type * from './idempotency/idempotency-store.interface.js';
export type * from './interfaces/idempotency-key-options.interface.js';
export { defineUniqueJob } from './interceptor/job-definitions.js';
export type { ResolvedJobDefinition } from './interceptor/job-definitions.js';
export { JobInterceptor } from './interceptor/job.interceptor.js';
export type { BulkJob, UniqueJobMarker } from './interceptor/job.interceptor.js';
export { UniqueJobsWorkerGuard } from './interceptor/worker.guard.js';
export { UniqueJobsQueueGuard } from './interceptor/queue.guard.js';
export { digest, lockKey, DIGEST_VERSION } from './digest/digest.js';
export type { DigestInput, LockKeyInput } from './digest/digest.js';
export { canonicalJson } from './digest/canonical-json.js';
export { UniqueJobsEvents } from './events/unique-jobs.events.js';
export type { UniqueJobEvent, IdempotencyEvent } from './events/unique-jobs.events.js';
export { DeadSetService } from './dead-set/dead-set.service.js';
export type { DeadSetEntry } from './dead-set/dead-set-entry.interface.js';
export { Lock, LOCKS } from './locks/index.js';
export { DEFAULT_JOB_OPTIONS, DEFAULT_PREFIX } from './unique-jobs.options.js';
export { UNIQUE_JOBS_MODULE_OPTIONS } from './unique-jobs.module-definition.js';
export * from './errors/index.js';
export type * from './interfaces/unique-job-options.interface.js';
export type * from './interfaces/unique-jobs-module-options.interface.js';
export type * from './interfaces/enqueue-result.interface.js';
export type * from './interfaces/conflict-strategy.interface.js';
