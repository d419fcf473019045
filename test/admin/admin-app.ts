import 'reflect-metadata';
import { afterAll, afterEach } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import {
  Injectable,
  UnauthorizedException,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Job, Queue, QueueEvents } from 'bullmq';
import {
  UniqueJobsAdminModule,
  UniqueJobsModule,
  UniqueJobsService,
  type UniqueJobsAdminModuleOptions,
  type UniqueJobsModuleOptions,
} from '../../lib/index.js';
import { processorClass, type TestAppOptions } from '../support/app.js';
import {
  bullConnection,
  openQueueEvents,
  bullPrefix,
  closeBullConnection,
  deleteKeys,
  onCluster,
  redisClient,
  scanKeys,
  uniqueName,
} from '../support/redis.js';

/** Where the tests mount the admin. */
export const ADMIN_PATH = 'ops/unique-jobs';

/** Bearer tokens the test guard knows: the user each one signs in. */
const USERS: Readonly<Record<string, string>> = { 'Bearer ops-token': 'ops', 'Bearer other-token': 'other' };

/** `Authorization` header of the operator. */
export const OPS = 'Bearer ops-token';
/** `Authorization` header of another (also allowed) user. */
export const OTHER = 'Bearer other-token';
/** `Authorization` header the guard refuses (403). */
export const INTRUDER = 'Bearer stolen-token';

/**
 * The guard of the test apps, like a user's: no credentials → 401, unknown credentials → 403 (`false`), else the
 * user is put on the request (the CSRF token is bound to it).
 */
@Injectable()
export class TestAdminGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    const auth = req.headers.authorization;
    if (auth === undefined) throw new UnauthorizedException('Sign in to see the unique-jobs admin');
    const user = USERS[auth];
    if (user === undefined) return false;
    req.user = { id: user };
    return true;
  }
}

export interface AdminTestAppOptions {
  /** The queues, each with its processor options (as `startApp`). */
  queues: TestAppOptions[];
  /** Admin options over the defaults (path, TestAdminGuard). */
  admin?: Partial<UniqueJobsAdminModuleOptions>;
  module?: Partial<UniqueJobsModuleOptions>;
  /** `app.setGlobalPrefix(...)` of the application. */
  globalPrefix?: string;
}

export interface AdminTestApp {
  app: INestApplication;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** `http://127.0.0.1:<port>[/<global prefix>]/ops/unique-jobs` */
  adminUrl: string;
  prefix: string;
  service: UniqueJobsService;
  queue(name: string): Queue;
  /** Waits for a job to finish; resolves its return value. */
  finished(queue: string, job: Job): Promise<unknown>;
  close(): Promise<void>;
}

/** A Nest HTTP application (Express, port 0) with BullMQ, the unique-jobs module, its admin and the given queues. */
export async function startAdminApp(options: AdminTestAppOptions): Promise<AdminTestApp> {
  const prefix = options.module?.prefix ?? uniqueName('ujadm');
  const runs: Job[] = [];
  const providers = options.queues
    .filter((queue) => queue.unique !== undefined || queue.idempotency !== undefined || queue.handler)
    .map((queue) => processorClass(queue, runs));
  const connection = bullConnection();
  const moduleRef = await Test.createTestingModule({
    imports: [
      BullModule.forRoot(onCluster ? { connection, prefix: bullPrefix() } : { connection }),
      ...options.queues.map((queue) => BullModule.registerQueue({ name: queue.queue })),
      UniqueJobsModule.forRoot({ logger: false, ...options.module, prefix }),
      UniqueJobsAdminModule.forRoot({ path: ADMIN_PATH, guard: TestAdminGuard, ...options.admin }),
    ],
    providers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  if (options.globalPrefix) app.setGlobalPrefix(options.globalPrefix);
  await app.listen(0, '127.0.0.1');
  const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  // Subscribed before any job is added, so `finished` never misses an event.
  const events = new Map<string, QueueEvents>();
  for (const { queue } of options.queues) {
    events.set(queue, await openQueueEvents(queue));
  }
  return {
    app,
    origin,
    adminUrl: `${origin}${options.globalPrefix ? `/${options.globalPrefix}` : ''}/${ADMIN_PATH}`,
    prefix,
    service: app.get(UniqueJobsService),
    queue: (name) => app.get<Queue>(getQueueToken(name)),
    finished: async (queue, job) => (await job.waitUntilFinished(events.get(queue)!)) as unknown,
    close: async () => {
      await app.close();
      for (const queueEvents of events.values()) await queueEvents.close();
      await closeBullConnection(connection);
      const client = redisClient();
      try {
        for (const pattern of [...options.queues.map((queue) => `${bullPrefix()}:${queue.queue}:*`), `${prefix}:*`]) {
          await deleteKeys(client, await scanKeys(client, pattern));
        }
      } finally {
        await client.quit();
      }
    },
  };
}

/** What {@link http} answers. */
export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON (`undefined` when it is not JSON). */
  json: unknown;
}

/** One HTTP request (no redirect following). */
export async function http(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpAnswer> {
  const response = await fetch(url, { redirect: 'manual', ...init });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** A CSRF token and the cookie it belongs to, as a JSON client gets them (`GET api/csrf`). */
export async function csrfOf(app: AdminTestApp, auth = OPS): Promise<{ token: string; cookie: string }> {
  const answer = await http(`${app.adminUrl}/api/csrf`, { headers: { authorization: auth } });
  if (answer.status !== 200) throw new Error(`GET api/csrf answered ${answer.status}: ${answer.text}`);
  const setCookie = answer.headers.getSetCookie()[0];
  return { token: (answer.json as { token: string }).token, cookie: setCookie.split(';')[0] };
}

/**
 * The admin app lifecycle of a test file: `start` boots an app (the one a test started is closed after it, and
 * `current()` answers it); `redis` is a plain client for assertions, quit after the file. Call once, in a `describe`.
 */
export function useAdminApp(): {
  redis: ReturnType<typeof redisClient>;
  start(options: AdminTestAppOptions): Promise<AdminTestApp>;
  current(): AdminTestApp;
} {
  const redis = redisClient();
  let app: AdminTestApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(async () => void (await redis.quit()));
  return {
    redis,
    start: async (options) => (app = await startAdminApp(options)),
    current: () => {
      if (!app) throw new Error('no admin app started in this test');
      return app;
    },
  };
}
