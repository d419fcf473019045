import 'reflect-metadata';
import { BullModule, getQueueToken, Processor, WorkerHost, type RegisterQueueOptions } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import { QueueEvents, type Job, type Queue, type Worker, type WorkerOptions } from 'bullmq';
import {
  IdempotencyKey,
  UniqueJob,
  UniqueJobsModule,
  UniqueJobsService,
  type IdempotencyKeyOptions,
  type UniqueJobDefinition,
  type UniqueJobOptions,
  type UniqueJobsModuleOptions,
} from '../../lib/index.js';
import {
  bullOptions,
  bullPrefix,
  bullRootOptions,
  closeBullConnection,
  deleteKeys,
  lastEventId,
  redisClient,
  scanKeys,
  uniqueName,
} from './redis.js';

export type Handler = (job: Job) => Promise<unknown>;

export interface TestAppOptions {
  /** The queue (also the processor's). */
  queue: string;
  /** `@UniqueJob` options of the processor; each entry is one decorator. Omit for an app with no processor. */
  unique?: UniqueJobOptions | UniqueJobDefinition | (UniqueJobOptions | UniqueJobDefinition)[];
  /** `@IdempotencyKey` options of the processor; each entry is one decorator. */
  idempotency?: IdempotencyKeyOptions | IdempotencyKeyOptions[];
  /** The processor's body. Default: resolves `undefined`. */
  handler?: Handler;
  /** Static members of the processor class (e.g. a `lockArgs` method). */
  statics?: Record<string, unknown>;
  /** Module options (the prefix defaults to a fresh one). */
  module?: Partial<UniqueJobsModuleOptions>;
  /** Worker options of the processor. */
  worker?: Partial<WorkerOptions>;
  /** `BullModule.registerQueue` options of the queue besides its name (e.g. `defaultJobOptions`). */
  queueOptions?: Omit<RegisterQueueOptions, 'name'>;
  /** Leave the worker paused (not fetching) until `start()` is called. */
  paused?: boolean;
  /**
   * Declare `process(job, token, signal)`: BullMQ gives a processor of three parameters an abort signal (and
   * `worker.cancelJob` acts on its jobs); the handler still gets the job alone.
   */
  acceptsSignal?: boolean;
  /** Declare `process` as a plain method, not `async`: what the handler throws synchronously, `process` throws. */
  syncProcess?: boolean;
}

export interface TestApp {
  moduleRef: TestingModule;
  queue: Queue;
  queueEvents: QueueEvents;
  service: UniqueJobsService;
  prefix: string;
  /** Jobs the handler was called with, in order. */
  runs: Job[];
  /** The processor's worker (`undefined` for an app with no processor). */
  worker: Worker | undefined;
  /** Starts the worker when created with `paused`. */
  start(): void;
  /** Waits for a job to finish; resolves its return value or rejects with its failure. */
  finished(job: Job | string): Promise<unknown>;
  close(): Promise<void>;
}

/** Deletes what a test left in Redis: the queue's keys and the library's keys under the test's prefix. */
async function cleanUp(queue: string, prefix: string): Promise<void> {
  const client = redisClient();
  try {
    for (const pattern of [`${bullPrefix()}:${queue}:*`, `${prefix}:*`])
      await deleteKeys(client, await scanKeys(client, pattern));
  } finally {
    await client.quit();
  }
}

/** Builds a processor class for a queue, decorated like a user's. */
export function processorClass(options: TestAppOptions, runs: Job[]): new () => WorkerHost {
  const handler = options.handler ?? (async () => undefined);
  const workerOptions = { autorun: !options.paused, ...options.worker } as WorkerOptions;
  @Processor(options.queue, workerOptions)
  class TestProcessor extends WorkerHost {
    async process(job: Job): Promise<unknown> {
      runs.push(job);
      return handler(job);
    }
  }
  if (options.syncProcess) {
    TestProcessor.prototype.process = function (job: Job) {
      runs.push(job);
      return handler(job);
    };
  }
  if (options.acceptsSignal) {
    const process = TestProcessor.prototype.process;
    // BullMQ reads the arity.
    TestProcessor.prototype.process = function (job: Job, _token?: string, _signal?: AbortSignal) {
      return process.call(this, job);
    };
  }
  Object.assign(TestProcessor, options.statics ?? {});
  for (const unique of [options.unique ?? []].flat().reverse()) UniqueJob(unique)(TestProcessor);
  for (const keyed of [options.idempotency ?? []].flat().reverse()) IdempotencyKey(keyed)(TestProcessor);
  return TestProcessor;
}

/** A Nest application with BullMQ, the unique-jobs module, a queue and (optionally) its processor. */
export async function startApp(options: TestAppOptions): Promise<TestApp> {
  const runs: Job[] = [];
  const prefix = options.module?.prefix ?? uniqueName('ujt');
  const providers =
    options.unique !== undefined || options.idempotency !== undefined || options.handler
      ? [processorClass(options, runs)]
      : [];
  // On a cluster run BullMQ gets a Cluster client (which the library reuses, as it would in an app) and the hash-tagged
  // prefix `{bull}` that BullMQ requires there.
  const bullRoot = bullRootOptions();
  const moduleRef = await Test.createTestingModule({
    imports: [
      BullModule.forRoot(bullRoot),
      BullModule.registerQueue({ ...options.queueOptions, name: options.queue }),
      UniqueJobsModule.forRoot({ logger: false, ...options.module, prefix }),
    ],
    providers,
  }).compile();
  try {
    await moduleRef.init();
  } catch (error) {
    // A bootstrap that fails (a test of bad options) must not leave the module's connections open: jest would hang.
    await moduleRef.close().catch(() => undefined);
    throw error;
  }
  const queue = moduleRef.get<Queue>(getQueueToken(options.queue));
  const queueEvents = new QueueEvents(options.queue, { ...bullOptions(), lastEventId: await lastEventId(queue) });
  // A failover unblocks its XREAD ("UNBLOCKED … master -> replica"); BullMQ reads on, and logs it when nobody listens.
  queueEvents.on('error', () => undefined);
  await queueEvents.waitUntilReady();
  const processor = providers[0] ? moduleRef.get<WorkerHost>(providers[0]) : undefined;
  if (processor && !options.paused) await processor.worker.waitUntilReady();
  return {
    moduleRef,
    queue,
    queueEvents,
    service: moduleRef.get(UniqueJobsService),
    prefix,
    runs,
    worker: processor?.worker,
    start: () => {
      void processor?.worker.run();
    },
    finished: async (job) => {
      const found = typeof job === 'string' ? await queue.getJob(job) : job;
      if (!found) throw new Error(`job ${typeof job === 'string' ? job : job.id} not found`);
      try {
        return (await found.waitUntilFinished(queueEvents)) as unknown;
      } catch (error) {
        // BullMQ checks the job after subscribing: one that finished and was removed (removeOnComplete / removeOnFail)
        // before that check is "missing", its outcome still in the queue's event stream.
        if (!/^Missing key for job/.test((error as Error).message)) throw error;
        return finishedFromEvents(queue, found.id!);
      }
    },
    close: async () => {
      await moduleRef.close();
      await queueEvents.close();
      await closeBullConnection(bullRoot.connection);
      await cleanUp(options.queue, prefix);
    },
  };
}

/** The outcome of a finished job read from its queue's event stream: its return value, or its failure thrown. */
async function finishedFromEvents(queue: Queue, jobId: string): Promise<unknown> {
  const client = redisClient();
  try {
    const entries = await client.xrevrange(`${bullPrefix()}:${queue.name}:events`, '+', '-', 'COUNT', 10_000);
    for (const [, fields] of entries) {
      const event = new Map<string, string>();
      for (let i = 0; i + 1 < fields.length; i += 2) event.set(fields[i], fields[i + 1]);
      if (event.get('jobId') !== jobId) continue;
      if (event.get('event') === 'completed') return JSON.parse(event.get('returnvalue') ?? 'null') as unknown;
      if (event.get('event') === 'failed') throw new Error(event.get('failedReason'));
    }
    throw new Error(`job ${jobId} was removed, and its queue's events hold no outcome of it`);
  } finally {
    await client.quit();
  }
}
