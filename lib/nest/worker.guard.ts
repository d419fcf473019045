import { Inject, Injectable } from '@nestjs/common';
import type { WorkerHost } from '@nestjs/bullmq';
import type { Job, Worker } from 'bullmq';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import type { IdempotencyDefinitions } from '../idempotency/idempotency-definitions.js';
import type { IdempotencyKeyOptions } from '../idempotency/idempotency-key-options.interface.js';
import type { UniqueJobOptions } from '../interfaces/unique-job-options.interface.js';
import type { JobDefinitions } from '../options/job-definitions.js';
import {
  IDEMPOTENCY_KEY_METADATA,
  PROCESSOR_METADATA,
  UNIQUE_JOB_METADATA,
  UNIQUE_JOBS_DEFINITIONS,
  UNIQUE_JOBS_IDEMPOTENCY,
  WORKER_GUARD_PROPERTY,
  WORKER_GUARD_TOKEN,
} from './unique-jobs.constants.js';
import { JobInterceptor } from './job.interceptor.js';
import { bullKeys } from '../redis/keys.js';
import type { ProcessFn } from '../worker/job-runner.js';

/**
 * Wraps a processor's `process` with the job interceptor. It runs while Nest instantiates the processor (the guard is
 * property-injected and installs itself in the property's setter), which is before any `onModuleInit`, so it is in
 * place before `@nestjs/bullmq` creates the worker and starts fetching jobs, whatever the module order.
 */
@Injectable()
export class UniqueJobsWorkerGuard {
  /**
   * The first instance of each guarded processor class: the one `@nestjs/bullmq` attaches the worker to. (A
   * request-scoped processor gets an instance per job; keeping one per class keeps this bounded.)
   */
  private readonly installed = new Map<object, WorkerHost>();
  /** The static instances of request-scoped guarded processors (where their workers live). */
  private readonly scopedHosts = new Set<object>();
  /** Processor classes whose options are registered. */
  private readonly registered = new Set<object>();

  constructor(
    private readonly interceptor: JobInterceptor,
    @Inject(UNIQUE_JOBS_DEFINITIONS) private readonly definitions: JobDefinitions,
    @Inject(UNIQUE_JOBS_IDEMPOTENCY) private readonly idempotency: IdempotencyDefinitions,
  ) {}

  /**
   * Registers a processor class's `@UniqueJob` and `@IdempotencyKey` options (once per class; a subclass without
   * decorators of its own inherits its base class's). Runs when Nest instantiates the processor, and
   * at module init for request-scoped processors, which Nest does not instantiate until a job arrives.
   */
  register(processorClass: object): void {
    if (this.registered.has(processorClass)) return;
    const name = (processorClass as { name?: string }).name ?? 'processor';
    const queue = (Reflect.getMetadata(PROCESSOR_METADATA, processorClass) as { name?: string } | undefined)?.name;
    if (!queue) {
      throw new InvalidUniqueJobOptionsError(
        name,
        Reflect.hasMetadata(UNIQUE_JOB_METADATA, processorClass) ? '@UniqueJob' : '@IdempotencyKey',
        'must decorate a class decorated with @Processor(queueName) from @nestjs/bullmq',
      );
    }
    for (const { options, source } of alongChain<UniqueJobOptions>(UNIQUE_JOB_METADATA, processorClass, '@UniqueJob')) {
      this.definitions.register(queue, options, source, processorClass);
    }
    for (const { options, source } of alongChain<IdempotencyKeyOptions>(
      IDEMPOTENCY_KEY_METADATA,
      processorClass,
      '@IdempotencyKey',
    )) {
      this.idempotency.register(queue, options, source);
    }
    this.registered.add(processorClass);
  }

  /** Whether a processor class's options are registered (it has `@UniqueJob` or `@IdempotencyKey`). */
  isRegistered(processorClass: object): boolean {
    return this.registered.has(processorClass);
  }

  /** Registers the processor's options and wraps its `process` (keeping its arity). */
  install(instance: object): void {
    const processorClass = instance.constructor;
    this.register(processorClass);
    if (!this.installed.has(processorClass)) this.installed.set(processorClass, instance as WorkerHost);
    const process = (instance as { process?: ProcessFn }).process;
    if (typeof process !== 'function') {
      throw new InvalidUniqueJobOptionsError(processorClass.name, 'process', 'must be a method (extend WorkerHost)');
    }
    const interceptor = this.interceptor;
    const guarded = function (this: object, job: Job<unknown, unknown>, token?: string, signal?: AbortSignal) {
      const worker = (this as { _worker?: Worker })._worker;
      return interceptor.process(job, token, signal, (j, t, s) => process.call(this, j, t, s), worker);
    };
    Object.defineProperty(guarded, 'length', { value: process.length });
    Object.defineProperty(instance, 'process', { value: guarded, writable: true, configurable: true });
    watchWorker(instance, interceptor);
  }

  /** The queues of the guarded processors' workers: name and key prefix (the reaper checks jobs there). */
  workerQueues(): { name: string; prefix: string }[] {
    return [...this.installed.values()].flatMap((instance) => {
      const worker = (instance as unknown as { _worker?: { name: string; qualifiedName: string } })._worker;
      return worker ? [{ name: worker.name, prefix: bullKeys.prefixOf(worker) }] : [];
    });
  }

  /**
   * Follows the static instance of a request-scoped guarded processor: @nestjs/bullmq puts its worker there (each job
   * runs on an instance of its own, so {@link install} never sees that one), and the shutdown must close it too.
   */
  followScoped(host: object): void {
    this.scopedHosts.add(host);
  }

  /** Closes the workers of guarded processors (waiting for their active jobs), before the lock client closes. */
  async closeWorkers(): Promise<void> {
    const workers = [...this.installed.values(), ...this.scopedHosts].flatMap((instance) => {
      const worker = (instance as unknown as { _worker?: { close(): Promise<void> } })._worker;
      return worker ? [worker] : [];
    });
    await Promise.all(workers.map((worker) => worker.close()));
  }
}

/**
 * The decorators' options of a processor class and of its base classes, the class's own first. A base class's options
 * for job names its subclass already covers (or for every name, when the subclass has options for every name) are
 * overridden, not registered twice; the others apply to the subclass too.
 */
function alongChain<T>(key: string, processorClass: object, decorator: string): { options: T; source: string }[] {
  const found: { options: T; source: string }[] = [];
  const named = new Set<string>();
  let everyName = false;
  for (let owner: object | null = processorClass; owner && owner !== Function.prototype;) {
    const own = (Reflect.getOwnMetadata(key, owner) ?? []) as T[];
    const name = (owner as { name?: string }).name ?? 'processor';
    const added: T[] = [];
    own.forEach((options, i) => {
      const names = jobNamesOf(options);
      // An empty list covers nothing: it reaches validation, which rejects it.
      const covered =
        names === undefined ? everyName : names.length > 0 && names.every((jobName) => named.has(jobName));
      if (covered) return;
      found.push({ options, source: `${name} (${decorator} #${i + 1})` });
      added.push(options);
    });
    for (const options of added) {
      const names = jobNamesOf(options);
      if (names === undefined) everyName = true;
      else names.forEach((jobName) => named.add(jobName));
    }
    owner = Object.getPrototypeOf(owner) as object | null;
  }
  return found;
}

/** The job names options apply to (`undefined`: every name); options that are not an object apply to every name. */
function jobNamesOf(options: unknown): readonly string[] | undefined {
  const jobName = (options as { jobName?: unknown } | null | undefined)?.jobName;
  if (jobName === undefined) return undefined;
  return ([jobName].flat() as unknown[]).filter((n): n is string => typeof n === 'string');
}

/**
 * Follows the worker `@nestjs/bullmq` attaches to the processor (`instance._worker = worker`, right after creating it,
 * before it runs a job): the interceptor hears of every job's end there, including a job BullMQ fails without calling
 * the processor.
 */
function watchWorker(instance: object, interceptor: JobInterceptor): void {
  let worker: Worker | undefined = (instance as { _worker?: Worker })._worker;
  if (worker) interceptor.attachWorker(worker);
  Object.defineProperty(instance, '_worker', {
    configurable: true,
    enumerable: true,
    get: () => worker,
    set: (value: Worker | undefined) => {
      worker = value;
      if (worker) interceptor.attachWorker(worker);
    },
  });
}

/**
 * Asks Nest to inject the worker guard into every instance of `target` through a property whose setter installs it.
 * Called by `@UniqueJob` (and any decorator that needs the processor guarded); idempotent.
 */
export function requestWorkerGuard(target: abstract new (...args: never[]) => unknown): void {
  const prototype = target.prototype as object;
  if (Object.prototype.hasOwnProperty.call(prototype, WORKER_GUARD_PROPERTY)) return;
  Object.defineProperty(prototype, WORKER_GUARD_PROPERTY, {
    configurable: true,
    enumerable: false,
    get: () => undefined,
    set(this: object, guard: UniqueJobsWorkerGuard) {
      guard.install(this);
    },
  });
  Inject(WORKER_GUARD_TOKEN)(prototype, WORKER_GUARD_PROPERTY);
}
