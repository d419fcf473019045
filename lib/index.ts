/**
 * nestjs-unique-jobs: unique jobs (sidekiq-unique-jobs semantics) for NestJS + BullMQ.
 * @packageDocumentation
 */
export { UniqueJobsModule } from './nest/unique-jobs.module.js';
export { UniqueJobsService } from './nest/unique-jobs.service.js';
export { UniqueJob } from './nest/unique-job.decorator.js';
export { IdempotencyKey } from './nest/idempotency-key.decorator.js';
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
export { SqlIdempotencyStore } from './idempotency/sql/sql-idempotency.store.js';
export type { SqlIdempotencyStoreOptions } from './idempotency/sql/sql-idempotency.store.js';
export type * from './idempotency/sql/sql-adapter.interface.js';
export { TypeOrmIdempotencyStore } from './idempotency/stores/typeorm-idempotency.store.js';
export type {
  TypeOrmIdempotencyStoreOptions,
  TypeOrmDataSourceLike,
  TypeOrmQueryRunnerLike,
  TypeOrmIsolationLevel,
} from './idempotency/stores/typeorm-idempotency.store.js';
export {
  UniqueJobsIdempotencyMigration,
  typeOrmIdempotencyMigration,
} from './idempotency/stores/typeorm-idempotency.migration.js';
export type {
  TypeOrmIdempotencyMigration,
  TypeOrmIdempotencyMigrationOptions,
  TypeOrmMigrationRunnerLike,
} from './idempotency/stores/typeorm-idempotency.migration.js';
export { DrizzleIdempotencyStore } from './idempotency/stores/drizzle-idempotency.store.js';
export type {
  DrizzleIdempotencyStoreOptions,
  DrizzlePgDatabaseLike,
  DrizzlePgTransactionConfig,
  DrizzleSqliteDatabaseLike,
  DrizzleSqlLike,
  DrizzleTransactionOf,
} from './idempotency/stores/drizzle-idempotency.store.js';
export { TransactionHostIdempotencyStore } from './idempotency/stores/transaction-host-idempotency.store.js';
export type {
  TransactionHostIdempotencyStoreOptions,
  TransactionHostLike,
} from './idempotency/stores/transaction-host-idempotency.store.js';
export { IdempotencyConnectionLostError } from './errors/idempotency-connection-lost.error.js';
export { IdempotencyTransactionEndedError } from './errors/idempotency-transaction-ended.error.js';
export type { EndedTransactionOutcome } from './errors/idempotency-transaction-ended.error.js';
export { IdempotencyStoreNotReadyError } from './errors/idempotency-store-not-ready.error.js';
export { DEFAULT_IDEMPOTENCY_OPTIONS, MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency/idempotency-options.js';
export {
  HASHED_IDEMPOTENCY_KEY_MARKER,
  normalizeIdempotencyKey,
  normalizeIdempotencyScope,
} from './idempotency/stored-key.js';
export type * from './idempotency/idempotency-store.interface.js';
export type * from './idempotency/idempotency-key-options.interface.js';
export { defineUniqueJob } from './options/job-definitions.js';
export { JobInterceptor } from './nest/job.interceptor.js';
export type { BulkJob } from './producer/guarded-queues.js';
export type { UniqueJobMarker } from './locks/job-marker.js';
export { UniqueJobsWorkerGuard } from './nest/worker.guard.js';
export { UniqueJobsQueueGuard } from './nest/queue.guard.js';
export { digest, lockKey, DIGEST_VERSION } from './digest/digest.js';
export type { DigestInput, LockKeyInput } from './digest/digest.js';
export { canonicalJson } from './digest/canonical-json.js';
export { UniqueJobsEvents } from './events/unique-jobs.events.js';
export type { UniqueJobEvent, IdempotencyEvent } from './events/unique-job-event.interface.js';
export { UNIQUE_JOBS_EVENT_PREFIX } from './events/event-emitter.forwarder.js';
export { DEFAULT_EVENT_LOG_LEVELS } from './events/event-logger.js';
export type { EventLogLevel, UniqueJobsLogLevels } from './events/event-logger.js';
export { UniqueJobsMetricsModule } from './ops/metrics/unique-jobs-metrics.module.js';
export { UniqueJobsMetrics } from './ops/metrics/unique-jobs-metrics.service.js';
export {
  UNIQUE_JOBS_METRICS_OPTIONS,
  DEFAULT_METRICS_PREFIX,
  DEFAULT_LOCK_WAIT_BUCKETS,
  DEFAULT_LOCK_HOLD_BUCKETS,
} from './ops/metrics/unique-jobs-metrics.constants.js';
export type * from './ops/metrics/interfaces/unique-jobs-metrics-options.interface.js';
export { UniqueJobsTracing } from './nest/unique-jobs.tracing.js';
export type * from './interfaces/job-instrumentation.interface.js';
export { UniqueJobsHealthModule } from './ops/health/unique-jobs-health.module.js';
export { UniqueJobsHealthIndicator } from './ops/health/unique-jobs-health.indicator.js';
export type * from './ops/health/interfaces/unique-jobs-health.interface.js';
export { LockInspector } from './ops/inspection/lock-inspector.js';
export type * from './ops/inspection/lock-inspection.interface.js';
export {
  isLockDigest,
  parseLockDigest,
  parseDigestPrefix,
  parseDigestPattern,
} from './ops/inspection/digest-format.js';
export { InvalidDigestError } from './ops/inspection/errors/invalid-digest.error.js';
export { InvalidCursorError } from './ops/inspection/errors/invalid-cursor.error.js';
export { UniqueJobsAdminModule } from './ops/admin/unique-jobs-admin.module.js';
export { UniqueJobsAdminService } from './ops/admin/unique-jobs-admin.service.js';
export type * from './ops/admin/interfaces/unique-jobs-admin-options.interface.js';
export type * from './ops/admin/interfaces/admin-views.interface.js';
export type { AdminRequest } from './ops/admin/http.js';
export { DeadSetService } from './dead-set/dead-set.service.js';
export { OrphanReaper } from './ops/reaper/orphan-reaper.js';
export type { OrphanReaperDeps } from './ops/reaper/orphan-reaper.js';
export { UniqueJobsReaper, DEFAULT_REAPER_INTERVAL } from './nest/unique-jobs.reaper.js';
export type * from './ops/reaper/reap-report.interface.js';
export type { DeadSetEntry, NewDeadSetEntry, RetryableDeadSetEntry } from './dead-set/dead-set-entry.interface.js';
export type { DeadSetBounds } from './dead-set/dead-set.service.js';
export { Lock, LOCKS } from './locks/index.js';
export { DEFAULT_JOB_OPTIONS, DEFAULT_PREFIX } from './options/defaults.js';
export { UNIQUE_JOBS_MODULE_OPTIONS } from './nest/unique-jobs.module-definition.js';
export * from './errors/index.js';
export type * from './interfaces/unique-job-options.interface.js';
export type * from './options/unique-jobs-module-options.interface.js';
export type * from './interfaces/enqueue-result.interface.js';
export type * from './conflicts/conflict-strategy.interface.js';
