import { ParkedRecordMarks } from '../redis/parked-record-marks.js';
import {
  Inject,
  Module,
  Optional,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryModule, ModuleRef } from '@nestjs/core';
import { getSharedConfigToken } from '@nestjs/bullmq';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { loggerOf } from '../common/logger.js';
import type { ConflictStrategy } from '../conflicts/conflict-strategy.interface.js';
import { strategyRegistry } from '../conflicts/index.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { IdempotencyDefinitions } from '../idempotency/idempotency-definitions.js';
import { IdempotencyRunner } from '../idempotency/idempotency.runner.js';
import { WaitingDuplicates } from '../idempotency/waiting-duplicates.js';
import { RedisIdempotencyStore } from '../idempotency/stores/redis-idempotency.store.js';
import { LockStore } from '../locks/lock-store.js';
import { DEFAULT_PREFIX } from '../options/defaults.js';
import { JobDefinitions } from '../options/job-definitions.js';
import type { UniqueJobsModuleOptions } from '../options/unique-jobs-module-options.interface.js';
import { UniqueJobsReaper } from './unique-jobs.reaper.js';
import { UniqueJobsKeys } from '../redis/keys.js';
import { RedisScripts } from '../redis/redis-scripts.js';
import { UniqueJobsTracing } from './unique-jobs.tracing.js';
import { validateModuleOptions } from '../options/module-options.js';
import { JobInterceptor } from './job.interceptor.js';
import { UniqueJobsQueueGuard } from './queue.guard.js';
import {
  UNIQUE_JOBS_DEFINITIONS,
  UNIQUE_JOBS_IDEMPOTENCY,
  UNIQUE_JOBS_LOCKS,
  UNIQUE_JOBS_REDIS,
  UNIQUE_JOBS_STRATEGIES,
  WORKER_GUARD_TOKEN,
} from './unique-jobs.constants.js';
import { ConfigurableModuleClass, UNIQUE_JOBS_MODULE_OPTIONS } from './unique-jobs.module-definition.js';
import { UniqueJobsService } from './unique-jobs.service.js';
import { UniqueJobsWorkerGuard } from './worker.guard.js';

/** The Redis client of the library, and whether the module created it (and so closes it). */
interface RedisHandle {
  client: Redis | Cluster;
  owned: boolean;
  /** Whether `forRoot` named the connection itself (else it is BullModule.forRoot's default one, or 127.0.0.1:6379). */
  given: boolean;
}

function openRedis(options: UniqueJobsModuleOptions, bullConfig: { connection?: unknown } | undefined): RedisHandle {
  const connection: unknown = options.connection ?? bullConfig?.connection;
  const clientOptions = (
    connection instanceof Redis || connection instanceof Cluster ? connection.options : connection
  ) as { keyPrefix?: string } | undefined;
  if (clientOptions?.keyPrefix) {
    // The library reads and writes BullMQ's own keys (deduplication keys, job hashes) by their full names.
    throw new InvalidUniqueJobOptionsError(
      'UniqueJobsModule',
      'connection',
      `must not set an ioredis keyPrefix (got "${clientOptions.keyPrefix}"): BullMQ's keys are shared by their full names; use the module option "prefix" for the library's keys`,
    );
  }
  const given = options.connection !== undefined;
  if (connection instanceof Redis || connection instanceof Cluster) return { client: connection, owned: false, given };
  // As BullMQ opens `{ url, ...options }`: the URL names the server (its parts win over the options').
  const { url, ...rest } = (connection ?? {}) as RedisOptions & { url?: unknown };
  // Lazy: a bootstrap that fails before the first lock operation leaves no connection open.
  const client =
    typeof url === 'string'
      ? new Redis(url, { ...rest, lazyConnect: true })
      : new Redis({ host: '127.0.0.1', port: 6379, ...rest, lazyConnect: true });
  return { client, owned: true, given };
}

/** Where the locks live: the scripts on the library's client, the lock operations and the key names. */
interface LockStorage {
  scripts: RedisScripts;
  store: LockStore;
  keys: UniqueJobsKeys;
}

/**
 * Unique jobs for `@nestjs/bullmq`: import it once with `UniqueJobsModule.forRoot(options)` (or `forRootAsync`),
 * annotate processors with `@UniqueJob`, and keep calling `queue.add`. Global by default (`isGlobal: true`).
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    // The options of the bare class (`imports: [UniqueJobsModule]`): forRoot and forRootAsync provide this token in
    // their dynamic module, whose providers Nest registers after these (the later one of a token wins), so this factory
    // runs only for an import without options, and fails it with a message that names the fix.
    {
      provide: UNIQUE_JOBS_MODULE_OPTIONS,
      useFactory: (): never => {
        throw new InvalidUniqueJobOptionsError(
          'the application',
          'UniqueJobsModule',
          'is imported without options (the bare class): import UniqueJobsModule.forRoot({ … }) or forRootAsync({ … }) once, in the root module; it is global, so feature modules inject UniqueJobsService without importing it',
        );
      },
    },
    {
      provide: UNIQUE_JOBS_REDIS,
      useFactory: (options: UniqueJobsModuleOptions, bullConfig?: { connection?: unknown }): RedisHandle => {
        validateModuleOptions(options);
        return openRedis(options, bullConfig);
      },
      inject: [UNIQUE_JOBS_MODULE_OPTIONS, { token: getSharedConfigToken(), optional: true }],
    },
    {
      provide: UNIQUE_JOBS_LOCKS,
      useFactory: (options: UniqueJobsModuleOptions, redis: RedisHandle): LockStorage => {
        const scripts = new RedisScripts(redis.client);
        return { scripts, store: new LockStore(scripts), keys: new UniqueJobsKeys(options.prefix ?? DEFAULT_PREFIX) };
      },
      inject: [UNIQUE_JOBS_MODULE_OPTIONS, UNIQUE_JOBS_REDIS],
    },
    {
      provide: UNIQUE_JOBS_STRATEGIES,
      useFactory: (options: UniqueJobsModuleOptions) => {
        // Nest may build this provider first: bad `strategies` must still fail with InvalidUniqueJobOptionsError.
        validateModuleOptions(options);
        return strategyRegistry(options.strategies);
      },
      inject: [UNIQUE_JOBS_MODULE_OPTIONS],
    },
    {
      provide: UNIQUE_JOBS_DEFINITIONS,
      useFactory: (
        options: UniqueJobsModuleOptions,
        strategies: ReadonlyMap<string, ConflictStrategy>,
        locks: LockStorage,
      ) => {
        const definitions = new JobDefinitions(options.defaults, strategies, locks);
        (options.jobs ?? []).forEach((job, i) =>
          definitions.register(job.queue, job, `forRoot jobs[${i}] (queue "${job.queue}")`),
        );
        return definitions;
      },
      inject: [UNIQUE_JOBS_MODULE_OPTIONS, UNIQUE_JOBS_STRATEGIES, UNIQUE_JOBS_LOCKS],
    },
    {
      provide: UNIQUE_JOBS_IDEMPOTENCY,
      useFactory: (options: UniqueJobsModuleOptions, redis: RedisHandle) => {
        const { store, stores = {}, defaults } = options.idempotency ?? {};
        const defaultStore =
          store ?? new RedisIdempotencyStore({ client: redis.client, prefix: options.prefix ?? DEFAULT_PREFIX });
        return new IdempotencyDefinitions(defaults, {
          default: defaultStore,
          named: new Map(Object.entries(stores)),
        });
      },
      inject: [UNIQUE_JOBS_MODULE_OPTIONS, UNIQUE_JOBS_REDIS],
    },
    {
      provide: UniqueJobsEvents,
      useFactory: (options: UniqueJobsModuleOptions, moduleRef: ModuleRef) => {
        validateModuleOptions(options);
        return new UniqueJobsEvents(options, moduleRef);
      },
      inject: [UNIQUE_JOBS_MODULE_OPTIONS, ModuleRef],
    },
    {
      provide: JobInterceptor,
      useFactory: (
        options: UniqueJobsModuleOptions,
        redis: RedisHandle,
        locks: LockStorage,
        definitions: JobDefinitions,
        strategies: ReadonlyMap<string, ConflictStrategy>,
        events: UniqueJobsEvents,
        idempotencyDefinitions: IdempotencyDefinitions,
      ) => {
        const logger = loggerOf(options.logger);
        const parkedRecords = new ParkedRecordMarks(redis.client, locks.keys, locks.store.jobs);
        return new JobInterceptor({
          parkedRecords,
          ...locks,
          definitions,
          idempotencyDefinitions,
          idempotency: new IdempotencyRunner({
            events,
            logger,
            waiting: new WaitingDuplicates(redis.client, locks.keys, logger),
            parkedRecords,
          }),
          strategies,
          client: redis.client,
          events,
          logger,
          enabled: options.enabled ?? true,
          ...(options.enqueueTimeout === undefined ? {} : { enqueueTimeout: options.enqueueTimeout }),
          ...(options.shutdownTimeout === undefined ? {} : { shutdownTimeout: options.shutdownTimeout }),
          connectionGiven: redis.given,
          ...(options.deadSet ? { deadSetBounds: options.deadSet } : {}),
        });
      },
      inject: [
        UNIQUE_JOBS_MODULE_OPTIONS,
        UNIQUE_JOBS_REDIS,
        UNIQUE_JOBS_LOCKS,
        UNIQUE_JOBS_DEFINITIONS,
        UNIQUE_JOBS_STRATEGIES,
        UniqueJobsEvents,
        UNIQUE_JOBS_IDEMPOTENCY,
      ],
    },
    UniqueJobsWorkerGuard,
    { provide: WORKER_GUARD_TOKEN, useExisting: UniqueJobsWorkerGuard },
    UniqueJobsQueueGuard,
    UniqueJobsService,
    UniqueJobsReaper,
    UniqueJobsTracing,
  ],
  exports: [
    UniqueJobsService,
    UniqueJobsWorkerGuard,
    WORKER_GUARD_TOKEN,
    UniqueJobsEvents,
    JobInterceptor,
    UniqueJobsReaper,
  ],
})
export class UniqueJobsModule
  extends ConfigurableModuleClass
  implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown
{
  constructor(
    @Inject(UNIQUE_JOBS_REDIS) private readonly redis: RedisHandle,
    private readonly workerGuard: UniqueJobsWorkerGuard,
    private readonly reaper: UniqueJobsReaper,
    @Inject(UNIQUE_JOBS_IDEMPOTENCY) private readonly idempotency: IdempotencyDefinitions,
    private readonly interceptor: JobInterceptor,
    private readonly queueGuard: UniqueJobsQueueGuard,
    @Optional() private readonly events?: UniqueJobsEvents,
  ) {
    super();
  }

  /**
   * Fails the bootstrap when Redis refuses the login of the library's connection, a guarded queue lives on another Redis
   * than that connection, or a configured idempotency store is not ready (a SQL store whose table is missing).
   */
  async onModuleInit(): Promise<void> {
    try {
      await this.queueGuard.checkServers(this.redis.client, this.redis.given);
    } catch (error) {
      if (this.redis.owned) this.redis.client.disconnect(); // no hook closes it after a failed bootstrap
      throw error;
    }
    await this.idempotency.verifyStores();
    this.interceptor.start();
  }

  /**
   * Before any module closes its queues and workers: a Redis that stays out of reach for `shutdownTimeout` is let go,
   * so that their closing (which waits for Redis) ends.
   */
  beforeApplicationShutdown(): void {
    this.queueGuard.watchConnections();
    this.interceptor.shuttingDown();
  }

  /** Lets guarded workers finish their active jobs (and release their locks) before the lock client closes. */
  async onApplicationShutdown(): Promise<void> {
    await this.workerGuard.closeWorkers();
    await this.interceptor.close();
    await this.reaper.stop();
    this.events?.complete();
    if (this.redis.owned) await this.redis.client.quit().catch(() => undefined);
  }
}
