import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { getQueueOptionsToken, QueueEventsHost } from '@nestjs/bullmq';
import { FlowProducer, Queue, QueueEvents, type JobsOptions } from 'bullmq';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import {
  IDEMPOTENCY_KEY_METADATA,
  PROCESSOR_METADATA,
  UNIQUE_JOB_METADATA,
  UNIQUE_JOBS_DEFINITIONS,
} from './unique-jobs.constants.js';
import type { BulkJob } from '../producer/guarded-queues.js';
import { JobInterceptor } from './job.interceptor.js';
import type { JobDefinitions } from '../options/job-definitions.js';
import { UniqueJobsWorkerGuard } from './worker.guard.js';
import { UNIQUE_JOBS_MODULE_OPTIONS } from './unique-jobs.module-definition.js';
import type { UniqueJobsModuleOptions } from '../options/unique-jobs-module-options.interface.js';
import { loggerOf, type LoggerLike } from '../common/logger.js';
import { warnIfEvicting } from '../redis/eviction-policy.js';
import { queueApart, SERVER_CHECK_MS, type CheckedQueue } from './queue-servers.check.js';
import type { Cluster, Redis } from 'ioredis';

const GUARDED = new WeakSet<Queue>();

/**
 * Routes `add` and `addBulk` of every queue registered with `BullModule.registerQueue` through the job interceptor, so
 * `@InjectQueue` users keep calling `queue.add`. Installed in `onModuleInit` of this global module, which Nest runs
 * before the hooks of your (non-global) modules.
 */
@Injectable()
export class UniqueJobsQueueGuard implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly interceptor: JobInterceptor,
    private readonly workerGuard: UniqueJobsWorkerGuard,
    @Inject(UNIQUE_JOBS_DEFINITIONS) private readonly definitions: JobDefinitions,
    @Inject(UNIQUE_JOBS_MODULE_OPTIONS) options: UniqueJobsModuleOptions,
  ) {
    this.logger = loggerOf(options.logger);
    this.jobs = options.jobs;
    this.enabled = options.enabled ?? true;
  }

  private readonly logger: LoggerLike;
  private readonly jobs: UniqueJobsModuleOptions['jobs'];
  /** `enabled: false`: the library is off, jobs pass straight through (nothing of its own to check). */
  private readonly enabled: boolean;
  /** The queues of processors carrying `@UniqueJob` or `@IdempotencyKey`. */
  private readonly decorated = new Set<string>();
  /** The queues this guard installed itself on before the bootstrap checked their servers. */
  private readonly installed: CheckedQueue[] = [];
  /** The library's connection, once the bootstrap checked the queues' servers: a queue guarded later is checked too. */
  private library: { client: Redis | Cluster; given: boolean } | undefined;

  /**
   * Nest lifecycle hook, at bootstrap: guards every queue registered with `BullModule.registerQueue`, checks the
   * processors' decorators, and warns about definitions naming no registered queue.
   *
   * @throws InvalidUniqueJobOptionsError when `UniqueJobsModule.forRoot` is imported more than once, or a queue with
   *   unique jobs is consumed by `BullModule.registerQueue({ processors })` (out of the library's reach).
   */
  onModuleInit(): void {
    const instances = this.discovery
      .getProviders()
      .filter((wrapper) => wrapper.instance instanceof UniqueJobsQueueGuard);
    if (instances.length > 1) {
      // Each instance would guard every queue with its own job definitions, and the first to start wins them all:
      // another instance's definitions would silently guard nothing.
      throw new InvalidUniqueJobOptionsError(
        'the application',
        'UniqueJobsModule.forRoot',
        `is imported ${instances.length} times (each import is an instance of its own): import it once, in the root module, with every job definition (forRoot jobs) and every store`,
      );
    }
    const registered = new Set<string>();
    // Every registration's options: a queue registered twice (a producer module and a worker module) has two.
    const queueOptions: { token: unknown; options: unknown }[] = [];
    for (const wrapper of this.discovery.getProviders()) {
      const isStatic = wrapper.isDependencyTreeStatic();
      const instance: unknown = isStatic ? wrapper.instance : undefined;
      if (typeof wrapper.token === 'string') queueOptions.push({ token: wrapper.token, options: instance });
      if (instance instanceof Queue) {
        this.install(instance);
        registered.add(instance.name);
        continue;
      }
      // As @nestjs/bullmq finds processor classes: factory and value providers through their instance.
      const providerClass: unknown =
        !wrapper.metatype || wrapper.inject ? (wrapper.instance as object | undefined)?.constructor : wrapper.metatype;
      if (typeof providerClass !== 'function') continue;
      this.checkProcessor(providerClass, isStatic, wrapper.isTransient);
      if (!isStatic && !wrapper.isTransient && wrapper.instance && this.workerGuard.isRegistered(providerClass)) {
        this.workerGuard.followScoped(wrapper.instance as object);
      }
    }
    this.warnUnregistered(registered);
    for (const queue of registered) {
      const token = getQueueOptionsToken(queue);
      for (const entry of queueOptions) if (entry.token === token) this.checkQueueProcessors(queue, entry.options);
    }
  }

  /**
   * Fails the bootstrap when a queue with unique job definitions (`forRoot` jobs, or a processor's decorators) is
   * consumed by `BullModule.registerQueue({ processors })`: @nestjs/bullmq builds those workers (callbacks, sandboxed
   * files) inside the queue's provider, out of the library's reach, so their jobs would run with no run-time lock, no
   * idempotency claim, and no enqueue lock given back by the worker.
   */
  private checkQueueProcessors(queue: string, options: unknown): void {
    const processors = (options as { processors?: unknown[] } | undefined)?.processors;
    if (!this.enabled || !processors?.length || !(this.definitions.hasQueue(queue) || this.decorated.has(queue)))
      return;
    throw new InvalidUniqueJobOptionsError(
      `BullModule.registerQueue({ name: "${queue}" })`,
      'processors',
      `is not supported on a queue with unique job definitions or @IdempotencyKey: @nestjs/bullmq runs them (callbacks and sandboxed files alike) on workers the library never sees, so their jobs would run without run-time locks or idempotency claims and keep their enqueue locks; consume the queue with a @Processor("${queue}") class carrying @UniqueJob instead`,
    );
  }

  /**
   * Warns of the queues of `forRoot` job definitions (the producer side's) with no queue registered with
   * `BullModule.registerQueue` in the application: a `new Queue(name)` of the application's own adds to them unguarded
   * unless passed to {@link install} (`UniqueJobsService.guardQueue`).
   */
  private warnUnregistered(registered: ReadonlySet<string>): void {
    const missing = new Set((this.jobs ?? []).map((job) => job.queue).filter((queue) => !registered.has(queue)));
    for (const queue of [...missing].sort()) {
      this.logger.warn(
        `Queue "${queue}" has forRoot job definitions but is not registered with BullModule.registerQueue in this application: only a registered queue, or one passed to UniqueJobsService.guardQueue(queue), is guarded (a new Queue("${queue}") of your own adds unguarded)`,
      );
    }
  }

  /**
   * Follows the connections the shutdown must not wait for forever besides the guarded queues' and workers': flow
   * producers and `@QueueEventsListener` hosts (`QueueEventsHost.queueEvents`) registered in the application.
   */
  watchConnections(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.isDependencyTreeStatic() ? wrapper.instance : undefined;
      if (instance instanceof FlowProducer) this.interceptor.watchConnection(instance);
      if (!(instance instanceof QueueEventsHost)) continue;
      let events: unknown;
      try {
        events = instance.queueEvents;
      } catch {
        continue; // never registered (manualRegistration): no connection to wait for
      }
      if (events instanceof QueueEvents) this.interceptor.watchConnection(events);
    }
  }

  /**
   * Checks that every guarded queue lives on the Redis server and database of the library's connection: its locks are
   * read and released there, the reaper reads the queues' jobs there (it would free live locks), and the library's own
   * keys belong beside the jobs. A queue known to live elsewhere (another server, database or ioredis `keyPrefix`)
   * fails the bootstrap (another server only is logged for a `connection` given to `forRoot`: see `queueApart`). A
   * server that does not answer within a few seconds is not checked (a Redis out of reach at bootstrap is the
   * availability check's); a queue guarded later ({@link install}) is checked at its first add. Fails the bootstrap
   * with `RedisLoginRefusedError` when Redis refuses the login of the library's connection (a wrong password, a user
   * that does not exist: a configuration error, where a Redis merely out of reach is an outage the application starts
   * through). Also logs an error, without waiting for it, when that server evicts keys when full (`warnIfEvicting`).
   */
  async checkServers(library: Redis | Cluster, given: boolean): Promise<void> {
    const login = this.enabled ? this.interceptor.loginSettled(SERVER_CHECK_MS) : undefined;
    void warnIfEvicting(library, this.logger);
    this.library = { client: library, given };
    const [refused, apart] = await Promise.all([login, queueApart(library, this.installed, given)]);
    if (refused) throw refused;
    if (apart?.fatal) throw apart.error;
    if (apart) this.logger.error(apart.error.message);
  }

  /** Guards one queue (idempotent). Use it for queues you create yourself with `new Queue(...)`. */
  install<Q extends Queue>(queue: Q): Q {
    // Before the bootstrap's check of the queues' servers (a registered queue, or one passed to guardQueue from a
    // constructor or a factory): checked with the others.
    if (!this.library && !this.installed.includes(queue)) this.installed.push(queue);
    if (GUARDED.has(queue)) return queue;
    GUARDED.add(queue);
    const add = queue.add.bind(queue);
    const addBulk = queue.addBulk.bind(queue);
    this.interceptor.registerQueue(queue, add, addBulk);
    const interceptor = this.interceptor;
    // Guarded after the bootstrap checked the queues' servers (`guardQueue`): checked at its first add, logged (the
    // add goes on). Not at once: a check waiting for a queue's connection would keep a queue closed meanwhile.
    let unchecked = this.library !== undefined;
    const check = () => {
      if (!unchecked || !this.library) return;
      unchecked = false;
      void queueApart(this.library.client, [queue], this.library.given).then(
        (apart) => apart && this.logger.error(apart.error.message),
      );
    };
    Object.assign(queue, {
      add: (name: string, data: unknown, opts?: JobsOptions) => {
        check();
        return interceptor.add(queue, name, data, opts);
      },
      addBulk: (jobs: BulkJob[]) => {
        check();
        return interceptor.addBulk(queue, jobs);
      },
    });
    return queue;
  }

  /**
   * Registers the options of request-scoped processors (Nest creates them only when a job arrives, too late for a
   * producer), and fails the bootstrap when a processor of a queue with `forRoot` job definitions has no `@UniqueJob`:
   * its worker would never take or release the locks.
   */
  private checkProcessor(providerClass: object, isStatic: boolean, isTransient: boolean): void {
    const queue = (Reflect.getMetadata(PROCESSOR_METADATA, providerClass) as { name?: string } | undefined)?.name;
    if (!queue) return;
    const guarded = Reflect.hasMetadata(UNIQUE_JOB_METADATA, providerClass);
    const keyed = Reflect.hasMetadata(IDEMPOTENCY_KEY_METADATA, providerClass);
    if ((guarded || keyed) && isTransient) {
      // @nestjs/bullmq runs a transient processor on an instance of its own that Nest never builds: nothing of the
      // library's would ever see its jobs (no lock taken, no key claimed), silently.
      throw new InvalidUniqueJobOptionsError(
        (providerClass as { name?: string }).name ?? 'processor',
        guarded ? '@UniqueJob' : '@IdempotencyKey',
        'is not supported on a Scope.TRANSIENT processor (@nestjs/bullmq runs it on an instance Nest never builds, so its jobs would pass unguarded): use the default scope or Scope.REQUEST',
      );
    }
    if (guarded || keyed) this.decorated.add(queue);
    if ((guarded || keyed) && !isStatic) this.workerGuard.register(providerClass);
    if (!guarded && this.definitions.hasQueue(queue)) {
      throw new InvalidUniqueJobOptionsError(
        (providerClass as { name?: string }).name ?? 'processor',
        '@UniqueJob',
        `is missing: the processor consumes queue "${queue}", which has unique job definitions (forRoot jobs); add @UniqueJob(definition) so its worker takes and releases the locks`,
      );
    }
  }
}
