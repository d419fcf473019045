import type { INestApplicationContext } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { JobInterceptor } from '../../nest/job.interceptor.js';
import type { JobDefinitions } from '../../options/job-definitions.js';
import { UniqueJobsWorkerGuard } from '../../nest/worker.guard.js';
import type { UniqueJobsModuleOptions } from '../../options/unique-jobs-module-options.interface.js';
import { bullKeys, UniqueJobsKeys } from '../../redis/keys.js';
import { UNIQUE_JOBS_DEFINITIONS, UNIQUE_JOBS_REDIS } from '../../nest/unique-jobs.constants.js';
import { UNIQUE_JOBS_MODULE_OPTIONS } from '../../nest/unique-jobs.module-definition.js';
import { DEFAULT_PREFIX } from '../../options/defaults.js';
import { queuePrefixOf } from '../../nest/queue-prefix.js';

/**
 * An application (or testing module) that imports `UniqueJobsModule`: `Test.createTestingModule(...).compile()`,
 * `NestFactory.create(...)` or `createApplicationContext(...)`, initialised.
 */
export type UniqueJobsTestTarget = Pick<INestApplicationContext, 'get'>;

/** A queue of the application: its name and key prefix. */
export interface TestedQueue {
  name: string;
  prefix: string;
}

/** What the testing helpers need from an application. */
export interface UniqueJobsInternals {
  client: Redis | Cluster;
  keys: UniqueJobsKeys;
  definitions: JobDefinitions;
  /** The queues this application guards (producers) or works (processors). */
  queues: TestedQueue[];
  /** A queue's BullMQ prefix, as `UniqueJobsService.digestOf` takes it. */
  prefixOf: (queue: { name: string; qualifiedName?: string } | string) => string;
}

/** Reads the library's parts from an application. */
export function internalsOf(app: UniqueJobsTestTarget): UniqueJobsInternals {
  const options = app.get<UniqueJobsModuleOptions>(UNIQUE_JOBS_MODULE_OPTIONS, { strict: false });
  const interceptor = app.get(JobInterceptor, { strict: false });
  const workerGuard = app.get(UniqueJobsWorkerGuard, { strict: false });
  const queues = new Map<string, TestedQueue>();
  const [guarded, workers] = [interceptor.guardedQueues(), workerGuard.workerQueues()];
  for (const queue of [...guarded, ...workers]) {
    queues.set(bullKeys.qualifiedName(queue.prefix, queue.name), queue);
  }
  return {
    client: app.get<{ client: Redis | Cluster }>(UNIQUE_JOBS_REDIS, { strict: false }).client,
    keys: new UniqueJobsKeys(options.prefix ?? DEFAULT_PREFIX),
    definitions: app.get<JobDefinitions>(UNIQUE_JOBS_DEFINITIONS, { strict: false }),
    queues: [...queues.values()],
    prefixOf: (queue) => queuePrefixOf(queue, guarded, workers),
  };
}
