// Redis out of reach: the app boots, an enqueue through the library fails after `enqueueTimeout` with
// RedisUnavailableError naming the connection (having sent nothing), the outage is logged once however many reconnect
// attempts fail, and once Redis is back the recovery is logged and enqueues work again. On a Redis server of the
// suite's own, killed and started again on the same port.
import 'reflect-metadata';
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisUnavailableError, UniqueJob, UniqueJobsModule } from '../lib/index.js';
import { deferred } from './support/deferred.js';
import { PrivateRedis } from './support/private-redis.js';
import { uniqueName } from './support/redis.js';

// Outages, relaunches and reconnects: a loaded machine can stretch a test past jest's default 30 s.
jest.setTimeout(90_000);

const server = await PrivateRedis.start();
afterAll(() => server.stop());

/** A logger that keeps every line, and resolves `next(pattern)` when a matching line is written. */
class Lines {
  readonly all: string[] = [];
  private readonly waiting: { pattern: RegExp; resolve(): void }[] = [];
  readonly logger = {
    log: (message: string) => this.add(message),
    warn: (message: string) => this.add(message),
    error: (message: string) => this.add(message),
  };

  matching(pattern: RegExp): string[] {
    return this.all.filter((line) => pattern.test(line));
  }

  next(pattern: RegExp): Promise<void> {
    const d = deferred();
    this.waiting.push({ pattern, resolve: d.resolve });
    return d.promise;
  }

  private add(message: string): void {
    this.all.push(message);
    for (const waiter of this.waiting.filter((w) => w.pattern.test(message))) {
      this.waiting.splice(this.waiting.indexOf(waiter), 1);
      waiter.resolve();
    }
  }
}

const UNREACHABLE = /is unreachable/;
const BACK = /is reachable again/;

async function boot(
  lines: Lines,
  options: { shutdownTimeout?: number } = {},
): Promise<{ moduleRef: TestingModule; queue: Queue; errors: () => number }> {
  const name = uniqueName('down');
  @Processor(name)
  @UniqueJob({ lock: 'until_executed', lockArgs: (data: { id: string }) => data.id })
  class DownProcessor extends WorkerHost {
    async process(job: Job): Promise<unknown> {
      return job.data;
    }
  }
  const moduleRef = await Test.createTestingModule({
    imports: [
      // Reconnect every 250 ms: BullMQ's default backoff grows to 20 s between attempts, which on a loaded machine
      // (a slow relaunch) can put the reconnection that ends an outage past the test's timeout.
      BullModule.forRoot({ connection: { host: '127.0.0.1', port: server.port, retryStrategy: () => 250 } }),
      BullModule.registerQueue({ name }),
      UniqueJobsModule.forRoot({ logger: lines.logger, enqueueTimeout: 300, prefix: uniqueName('ujdown'), ...options }),
    ],
    providers: [DownProcessor],
  }).compile();
  await moduleRef.init();
  const queue = moduleRef.get<Queue>(getQueueToken(name));
  let errors = 0;
  queue.on('error', () => (errors += 1));
  return { moduleRef, queue, errors: () => errors };
}

/** Waits until the queue's connection has failed `count` more times (reconnect attempts), counted by its events. */
async function moreErrors(queue: Queue, count: number): Promise<void> {
  await new Promise<void>((resolve) => {
    let seen = 0;
    const onError = () => {
      if (++seen < count) return;
      queue.off('error', onError);
      resolve();
    };
    queue.on('error', onError);
  });
}

describe('Redis out of reach', () => {
  it('at startup: an enqueue fails after enqueueTimeout naming the connection, one line per outage, and it recovers', async () => {
    await server.kill();
    const lines = new Lines();
    const outage = lines.next(UNREACHABLE);
    const { moduleRef, queue } = await boot(lines);
    try {
      const error = await queue.add('sync', { id: 'u1' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect((error as RedisUnavailableError).connection).toBe(`127.0.0.1:${server.port}`);
      expect((error as Error).message).toContain(`127.0.0.1:${server.port}`);
      await outage;
      await moreErrors(queue, 2); // BullMQ keeps trying to reconnect (every 250 ms here)
      expect(lines.matching(UNREACHABLE)).toHaveLength(1);
      expect(lines.all.filter((line) => /ECONNREFUSED/.test(line) && !UNREACHABLE.test(line))).toEqual([]);

      const back = lines.next(BACK);
      await server.relaunch();
      await back;
      const job = await queue.add('sync', { id: 'u1' });
      expect(job.id).toBeDefined();
      expect(lines.matching(BACK)).toHaveLength(1);
    } finally {
      await moduleRef.close();
      await server.admin.flushall();
    }
  });

  it('mid-run: a second outage gets its own line, and enqueues fail fast until Redis is back', async () => {
    const lines = new Lines();
    const { moduleRef, queue } = await boot(lines);
    try {
      await queue.add('sync', { id: 'a' });
      for (const round of [1, 2]) {
        const outage = lines.next(UNREACHABLE);
        await server.kill();
        await outage;
        // The line may come from another connection (a worker's blocking one fails first) while the queue's client has
        // not yet seen its socket close: an add sent then is resent by ioredis once the server is back, so it waits.
        const client = await (queue.getBackend() as unknown as { client: Promise<Redis> }).client;
        if (client.status === 'ready') await new Promise((resolve) => client.once('close', resolve));
        await expect(queue.add('sync', { id: `b${round}` })).rejects.toBeInstanceOf(RedisUnavailableError);
        const back = lines.next(BACK);
        await server.relaunch();
        await back;
        await queue.add('sync', { id: `c${round}` });
        expect(lines.matching(UNREACHABLE)).toHaveLength(round);
        expect(lines.matching(BACK)).toHaveLength(round);
      }
    } finally {
      await moduleRef.close();
      await server.admin.flushall();
    }
  });

  it('shutdown during an outage: close() ends once shutdownTimeout has passed without Redis, instead of waiting for it forever', async () => {
    const lines = new Lines();
    const { moduleRef, queue } = await boot(lines, { shutdownTimeout: 1_000 });
    let closed = false;
    try {
      await queue.add('sync', { id: 'before' });
      const outage = lines.next(UNREACHABLE);
      await server.kill();
      await outage;
      const started = Date.now();
      const closing = moduleRef.close().then(() => (closed = true));
      const late = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 30_000).unref());
      expect(await Promise.race([closing.then(() => 'closed' as const), late])).toBe('closed');
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(lines.matching(/at shutdown/)).toHaveLength(1);
    } finally {
      await server.relaunch();
      if (!closed) await moduleRef.close();
      await server.admin.flushall();
    }
  });
});
