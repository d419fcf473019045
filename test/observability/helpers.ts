import 'reflect-metadata';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BullModule, getQueueToken, type WorkerHost } from '@nestjs/bullmq';
import type { DynamicModule, INestApplication, Provider, Type } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { type QueueEvents, type Job, type Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { UniqueJobsModule, UniqueJobsService } from '../../lib/index.js';
import { afterAll, afterEach } from '@jest/globals';
import { processorClass, type TestApp, type TestAppOptions } from '../support/app.js';
import { releaseHeld } from '../support/gates.js';
import { deleteKeys, redisClient, openQueueEvents, redisOptions, scanKeys, uniqueName } from '../support/redis.js';

export interface ObservedAppOptions extends TestAppOptions {
  /** Modules imported next to BullModule and UniqueJobsModule (EventEmitterModule, TerminusModule, …). */
  imports?: (Type | DynamicModule)[];
  /** Extra providers. */
  providers?: Provider[];
  /** Controllers (served over HTTP when `http` is set). */
  controllers?: Type[];
  /** Start an HTTP server (platform-express) on a free port. */
  http?: boolean;
}

export interface ObservedApp {
  moduleRef: TestingModule;
  /** The HTTP application, with `http`. */
  app?: INestApplication;
  /** Base URL of the HTTP server, with `http`. */
  url?: string;
  queue: Queue;
  queueEvents: QueueEvents;
  service: UniqueJobsService;
  prefix: string;
  runs: Job[];
  processor?: WorkerHost;
  finished(job: Job | string): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * A Nest application like a user's: BullMQ, `UniqueJobsModule.forRoot`, a queue and (optionally) its processor, plus
 * the modules under test. Its own queue and prefix; `close()` deletes their keys.
 */
/**
 * The app lifecycle of an observability test file (as `useApps` for plain apps): after each test, lets held handlers
 * go and closes the apps the test started; after the file, quits the Redis client. Call once, inside a `describe`.
 */
export function useObservedApps(label: string): {
  redis: Redis;
  start(options?: Partial<ObservedAppOptions>): Promise<ObservedApp>;
  /** Closes an app before the test ends (it is not closed again after it). */
  stop(app: ObservedApp): Promise<void>;
} {
  const redis = redisClient();
  const apps: ObservedApp[] = [];
  afterEach(async () => {
    releaseHeld();
    for (const app of apps.splice(0)) await app.close();
  });
  afterAll(async () => {
    await redis.quit();
  });
  return {
    redis,
    start: async (options = {}) => {
      const app = await startObservedApp({ queue: uniqueName(label), ...options });
      apps.push(app);
      return app;
    },
    stop: async (app) => {
      apps.splice(apps.indexOf(app), 1);
      await app.close();
    },
  };
}

export async function startObservedApp(options: ObservedAppOptions): Promise<ObservedApp> {
  const runs: Job[] = [];
  const prefix = options.module?.prefix ?? uniqueName('ujo');
  const processor =
    options.unique !== undefined || options.idempotency !== undefined || options.handler
      ? processorClass(options, runs)
      : undefined;
  const moduleRef = await Test.createTestingModule({
    imports: [
      BullModule.forRoot({ connection: redisOptions() }),
      BullModule.registerQueue({ name: options.queue }),
      UniqueJobsModule.forRoot({ logger: false, ...options.module, prefix }),
      ...(options.imports ?? []),
    ],
    providers: [...(processor ? [processor] : []), ...(options.providers ?? [])],
    controllers: options.controllers ?? [],
  }).compile();
  let app: INestApplication | undefined;
  let url: string | undefined;
  if (options.http) {
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  } else {
    await moduleRef.init();
  }
  const queue = moduleRef.get<Queue>(getQueueToken(options.queue));
  const queueEvents = await openQueueEvents(options.queue);
  await queueEvents.waitUntilReady();
  const worker = processor ? moduleRef.get<WorkerHost>(processor) : undefined;
  if (worker && !options.paused) await worker.worker.waitUntilReady();
  return {
    moduleRef,
    ...(app ? { app, url } : {}),
    queue,
    queueEvents,
    service: moduleRef.get(UniqueJobsService),
    prefix,
    runs,
    ...(worker ? { processor: worker } : {}),
    finished: async (job) => {
      const found = typeof job === 'string' ? await queue.getJob(job) : job;
      if (!found) throw new Error(`job ${typeof job === 'string' ? job : job.id} not found`);
      return (await found.waitUntilFinished(queueEvents)) as unknown;
    },
    close: async () => {
      if (app) await app.close();
      else await moduleRef.close();
      await queueEvents.close();
      const client = redisClient();
      try {
        for (const pattern of [`bull:${options.queue}:*`, `${prefix}:*`]) {
          await deleteKeys(client, await scanKeys(client, pattern));
        }
      } finally {
        await client.quit();
      }
    },
  };
}

/** The app as the shared test helpers (`EventLog`, `digestOf`) take it: they use its `service` and `queue`. */
export function asTestApp(app: ObservedApp): TestApp {
  return app as unknown as TestApp;
}

/** A TCP port nothing listens on (bound, then closed). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

/** A redis-server of the test's own, on a free port: the only Redis a test may stop or flush. */
export interface OwnRedis {
  port: number;
  /** A client of it for assertions (quit by `stop`). */
  client: Redis;
  /** Stops the server (SIGTERM to the process this test started) and waits for it to exit. */
  stop(): Promise<void>;
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'unique-jobs-health-'));
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  child.unref(); // `stop` waits for it; its handle must not keep the test process alive while it is reaped
  const client = new Redis({
    host: '127.0.0.1',
    port,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 50,
    disconnectTimeout: 10,
  });
  client.on('error', () => undefined);
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if ((await client.ping()) === 'PONG') break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  let stopped = false;
  return {
    port,
    client,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      client.disconnect();
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
