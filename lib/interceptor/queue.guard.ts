import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { Queue, type JobsOptions } from 'bullmq';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import { PROCESSOR_METADATA, UNIQUE_JOBS_DEFINITIONS } from '../unique-jobs.constants.js';
import { JobInterceptor, type BulkJob } from './job.interceptor.js';
import type { JobDefinitions } from './job-definitions.js';
import { UniqueJobsWorkerGuard } from './worker.guard.js';

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
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.isDependencyTreeStatic() ? wrapper.instance : undefined;
      if (instance instanceof Queue) this.install(instance);
      else if (instance && typeof instance === 'object') this.checkProcessor(instance);
    }
  }

  /** Guards one queue (idempotent). Use it for queues you create yourself with `new Queue(...)`. */
  install<Q extends Queue>(queue: Q): Q {
    if (GUARDED.has(queue)) return queue;
    GUARDED.add(queue);
    const add = queue.add.bind(queue);
    const addBulk = queue.addBulk.bind(queue);
    this.interceptor.registerQueue(queue, add, addBulk);
    const interceptor = this.interceptor;
    Object.assign(queue, {
      add: (name: string, data: unknown, opts?: JobsOptions) => interceptor.add(queue, name, data, opts),
      addBulk: (jobs: BulkJob[]) => interceptor.addBulk(queue, jobs),
    });
    return queue;
  }

  /** A processor of a queue with unique job definitions must be guarded, or its locks would never be released. */
  private checkProcessor(instance: object): void {
    const queue = (Reflect.getMetadata(PROCESSOR_METADATA, instance.constructor) as { name?: string } | undefined)
      ?.name;
    if (queue && this.definitions.hasQueue(queue) && !this.workerGuard.isInstalled(instance)) {
      throw new InvalidUniqueJobOptionsError(
        instance.constructor.name,
        '@UniqueJob',
        `is missing: the processor consumes queue "${queue}", which has unique job definitions (forRoot jobs); add @UniqueJob(definition) so its worker takes and releases the locks`,
      );
    }
  }
}
