// Redis out of reach: the app boots, an enqueue through the library fails after `enqueueTimeout` with
// RedisUnavailableError naming the connection (having sent nothing), the outage is logged once however many reconnect
// attempts fail, and once Redis is back the recovery is logged and enqueues work again. On a Redis server of the
// suite's own, killed and started again on the same port.
import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { BullModule, getQueueToken, Processor, QueueEventsHost, QueueEventsListener, WorkerHost } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { RedisUnavailableError, UniqueJob, UniqueJobsModule } from '../lib/index.js';
import { RedisAvailability } from '../lib/redis/redis-availability.js';
import { deferred } from './support/deferred.js';
import { PrivateRedis } from './support/private-redis.js';
import { uniqueName } from './support/redis.js';
import { waitFor } from './support/wait.js';

// Outages, relaunches and reconnects: a loaded machine can stretch a test past jest's default 30 s.
jest.setTimeout(90_000);

// AOF: a server killed and started again keeps its jobs (the shutdown test completes one across a restart).
const server = await PrivateRedis.start({ appendonly: true });
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

interface BootOptions {
  shutdownTimeout?: number;
  /** The processor's work (default: return the data). */
  handler?: (job: Job) => Promise<unknown>;
  /** Also register a `@QueueEventsListener` of the queue and a flow producer. */
  listeners?: boolean;
}

async function boot(
  lines: Lines,
  { handler, listeners, ...options }: BootOptions = {},
): Promise<{ moduleRef: TestingModule; queue: Queue; errors: () => number }> {
  const name = uniqueName('down');
  @Processor(name)
  @UniqueJob({ lock: 'until_executed', lockArgs: (data: { id: string }) => data.id })
  class DownProcessor extends WorkerHost {
    async process(job: Job): Promise<unknown> {
      return handler ? handler(job) : job.data;
    }
  }
  @QueueEventsListener(name)
  class DownEvents extends QueueEventsHost {}
  const moduleRef = await Test.createTestingModule({
    imports: [
      // Reconnect every 250 ms: BullMQ's default backoff grows to 20 s between attempts, which on a loaded machine
      // (a slow relaunch) can put the reconnection that ends an outage past the test's timeout.
      BullModule.forRoot({ connection: { host: '127.0.0.1', port: server.port, retryStrategy: () => 250 } }),
      BullModule.registerQueue({ name }),
      ...(listeners ? [BullModule.registerFlowProducer({ name: `${name}-flows` })] : []),
      UniqueJobsModule.forRoot({ logger: lines.logger, enqueueTimeout: 300, prefix: uniqueName('ujdown'), ...options }),
    ],
    providers: [DownProcessor, ...(listeners ? [DownEvents] : [])],
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

/** Waits until the queue's own connection is ready: "reachable again" is logged by the first connection that reconnects
 * (a worker's may come first), and each connection reconnects on its own retry schedule. */
async function queueConnected(queue: Queue): Promise<void> {
  const client = await (queue.getBackend() as unknown as { client: Promise<Redis> }).client;
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
}

/** The suite's server, as ioredis options (no retry limit per command, as BullMQ's connections). */
function serverOptions() {
  return { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null };
}

/**
 * A RedisAvailability (enqueues wait `timeoutMs`) following `other`, a client of the suite's server that reconnects
 * every `otherRetryMs` (the library's own), and a queue on `queueClient`. `given()` answers what an enqueue's wait for
 * the queue's connection ends with; `close()` closes them all and empties the server.
 */
function queueBeside(logger: Lines['logger'], queueClient: Redis, otherRetryMs = 50, timeoutMs = 300) {
  const availability = new RedisAvailability(logger, timeoutMs);
  const other = new Redis({ ...serverOptions(), retryStrategy: () => otherRetryMs });
  availability.watchClient(other);
  const queue = new Queue(uniqueName('beside'), { connection: queueClient });
  queue.on('error', () => undefined);
  availability.watch(queue);
  const given = () =>
    availability.ready(queue)!.then(
      () => undefined,
      (error: unknown) => error,
    );
  const close = async () => {
    await queue.close().catch(() => undefined);
    other.disconnect();
    queueClient.disconnect();
    if (server.admin.status === 'ready') await server.admin.flushall();
  };
  return { availability, other, queue, given, close };
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
      await queueConnected(queue);
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
        await queueConnected(queue);
        await queue.add('sync', { id: `c${round}` });
        expect(lines.matching(UNREACHABLE)).toHaveLength(round);
        expect(lines.matching(BACK)).toHaveLength(round);
      }
    } finally {
      await moduleRef.close();
      await server.admin.flushall();
    }
  });

  it('a late error from a connection that has not reconnected since the outage ended starts no new outage; the next real outage does', async () => {
    const lines = new Lines();
    const availability = new RedisAvailability(lines.logger, 300);
    let holdOff = false; // while set, `late` waits a minute between attempts: it stays on its pre-outage socket's state
    const options = { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null };
    const early = new Redis({ ...options, retryStrategy: () => 50 });
    const late = new Redis({ ...options, retryStrategy: () => (holdOff ? 60_000 : 50) });
    availability.watchClient(early);
    // Two queues sharing `late` (one ioredis instance given to both): each repeats its errors.
    const queues = [uniqueName('shared'), uniqueName('shared')].map((name) => new Queue(name, { connection: late }));
    for (const queue of queues) availability.watch(queue);
    try {
      await Promise.all([early.ping(), late.ping(), ...queues.map((queue) => queue.waitUntilReady())]);
      const outage = lines.next(UNREACHABLE);
      holdOff = true;
      await server.kill();
      await outage;
      const back = lines.next(BACK);
      await server.relaunch();
      await back; // `early` is ready again; `late` waits for its next attempt
      expect(late.status).not.toBe('ready');
      // What ioredis emits when the old socket's last write fails after the server came back (seen in CI as EPIPE).
      late.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      expect(lines.matching(UNREACHABLE)).toHaveLength(1);

      holdOff = false;
      late.disconnect(); // ends the minute's wait
      await late.connect();
      const second = lines.next(UNREACHABLE);
      await server.kill();
      await second;
      expect(lines.matching(UNREACHABLE)).toHaveLength(2);
      holdOff = true; // `late` stays out of this outage's end
      const backAgain = lines.next(BACK);
      await server.relaunch();
      await backAgain;
      expect(lines.matching(BACK)).toHaveLength(2);
      expect(late.status).not.toBe('ready');

      // A third outage that only `late` reports, a client not ready since the last one ended, while no other client is
      // ready (`early` is gone): the server is out of reach again, and that is logged.
      early.disconnect();
      await server.kill();
      const third = lines.next(UNREACHABLE);
      late.disconnect();
      void late.connect().catch(() => undefined);
      await third;
      expect(lines.matching(UNREACHABLE)).toHaveLength(3);
      await server.relaunch();
    } finally {
      for (const queue of queues) await queue.close().catch(() => undefined);
      early.disconnect();
      late.disconnect();
      await server.admin.flushall();
    }
  });

  it("an enqueue that gives up while the server answers another connection says that the queue's connection has not reconnected", async () => {
    const lines = new Lines();
    let holdOff = false; // while set, the queue's client waits a minute between attempts
    const slow = new Redis({ ...serverOptions(), retryStrategy: () => (holdOff ? 60_000 : 50) });
    const { other, queue, given, availability, close } = queueBeside(lines.logger, slow);
    try {
      await Promise.all([other.ping(), queue.waitUntilReady()]);
      expect(availability.ready(queue)).toBeUndefined();
      const outage = lines.next(UNREACHABLE);
      holdOff = true;
      await server.kill();
      await outage;
      const during = await given();
      expect(during).toBeInstanceOf(RedisUnavailableError);
      expect(during).toMatchObject({ reachableElsewhere: false });
      expect((during as Error).message).toContain('is not reachable');

      const back = lines.next(BACK);
      await server.relaunch();
      await back; // `other` is ready again; the queue's client waits for its next attempt, a minute away
      expect(slow.status).not.toBe('ready');
      const after = await given();
      expect(after).toBeInstanceOf(RedisUnavailableError);
      expect(after).toMatchObject({ reachableElsewhere: true, waitedMs: 300 });
      expect((after as Error).message).toMatch(
        /is reachable \(another connection of the application is ready\), but the queue's connection is not connected yet/,
      );
    } finally {
      await close();
    }
  });

  // Session 41's hostile review of reachableElsewhere.
  it("a queue's connection alone killed (CLIENT KILL), the server fine: reachableElsewhere true", async () => {
    const slow = new Redis({ ...serverOptions(), retryStrategy: () => 60_000 });
    const { other, queue, given, close } = queueBeside(new Lines().logger, slow);
    try {
      await Promise.all([other.ping(), queue.waitUntilReady()]);
      await server.admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'); // every client but admin's
      await waitFor('the queue to see its drop', () => slow.status !== 'ready');
      await waitFor('other to be ready again', () => other.status === 'ready');
      const error = await given();
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect(error).toMatchObject({ reachableElsewhere: true });
    } finally {
      await close();
    }
  }, 30_000);

  it('the first moments of an outage (no reconnect attempt failed yet): reachableElsewhere false', async () => {
    const slow = new Redis({ ...serverOptions(), retryStrategy: () => 60_000 });
    const { other, queue, given, close } = queueBeside(new Lines().logger, slow, 60_000, 100);
    try {
      await Promise.all([other.ping(), queue.waitUntilReady()]);
      await server.kill();
      await waitFor('the queue to see the drop', () => slow.status !== 'ready');
      const error = await given();
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect(error).toMatchObject({ reachableElsewhere: false });
    } finally {
      await close(); // the server is down: emptied once back
      await server.relaunch();
      await server.admin.flushall();
    }
  }, 30_000);

  it("a queue's connection whose login is refused (the library's accepted): the error does not claim it is reconnecting", async () => {
    const lines = new Lines();
    const refused = new Redis({ ...serverOptions(), username: 'nobody', password: 'wrong' });
    refused.on('error', () => undefined);
    const { other, given, close } = queueBeside(lines.logger, refused, 50, 500);
    try {
      await other.ping();
      const error = await given();
      expect(lines.matching(/WRONGPASS/).length).toBeGreaterThan(0); // logged apart, as a connection error
      expect(refused.status).not.toBe('ready');
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect(error).toMatchObject({ reachableElsewhere: false });
      expect((error as Error).message).toMatch(/WRONGPASS/);
    } finally {
      await close();
    }
  }, 30_000);

  it('an error other than "unreachable" is logged once, not once per queue sharing the client nor per reconnect', async () => {
    const lines = new Lines();
    const availability = new RedisAvailability(lines.logger, 300);
    const shared = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null });
    // The library's own client, given to three queues too (one ioredis instance): each queue repeats its errors.
    availability.watchClient(shared);
    const queues = [1, 2, 3].map(() => new Queue(uniqueName('other'), { connection: shared }));
    for (const queue of queues) availability.watch(queue);
    try {
      await Promise.all(queues.map((queue) => queue.waitUntilReady()));
      // What a server that refuses the login answers at every reconnect attempt.
      const refused = () => new Error('WRONGPASS invalid username-password pair or user is disabled.');
      shared.emit('error', refused());
      shared.emit('error', refused());
      expect(lines.matching(/WRONGPASS/)).toHaveLength(1);
      shared.emit('error', new Error('ERR another error'));
      expect(lines.matching(/ERR another error/)).toHaveLength(1);
      // Once a connection is ready again, the same error is news.
      const ready = new Promise((resolve) => shared.once('ready', resolve));
      shared.disconnect(true);
      await ready;
      shared.emit('error', refused());
      expect(lines.matching(/WRONGPASS/)).toHaveLength(2);
      expect(lines.matching(UNREACHABLE)).toEqual([]);
      // An outage in between (the server restarted, still refusing the login): news again.
      shared.emit('error', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      expect(lines.matching(UNREACHABLE)).toHaveLength(1);
      shared.emit('error', refused());
      expect(lines.matching(/WRONGPASS/)).toHaveLength(3);
      // And a repeat on a connection that stays up (a worker's OOM, hours apart): logged once `repeatAfterMs` passed.
      const brief = new Lines();
      const repeating = new RedisAvailability(brief.logger, 300, 200);
      repeating.watchClient(shared);
      const oom = () => new Error("OOM command not allowed when used memory > 'maxmemory'.");
      shared.emit('error', oom());
      shared.emit('error', oom());
      expect(brief.matching(/OOM/)).toHaveLength(1);
      await sleep(250); // the repeat window itself is what is tested: no event marks its end
      shared.emit('error', oom());
      expect(brief.matching(/OOM/)).toHaveLength(2);
    } finally {
      for (const queue of queues) await queue.close().catch(() => undefined);
      shared.disconnect();
    }
  });

  it('a client that ended and was connected anew is still let go at shutdown when it never gets through', async () => {
    const lines = new Lines();
    const availability = new RedisAvailability(lines.logger, 300);
    const options = { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null, retryStrategy: () => 100 };
    const client = new Redis(options);
    availability.watchClient(client);
    try {
      await client.ping();
      // As BullMQ does after a stuck blocking read: the same client ended, then connected again, here to a server gone.
      const ended = new Promise((resolve) => client.once('end', resolve));
      client.disconnect();
      await ended;
      await server.kill();
      const retrying = new Promise((resolve) => client.once('reconnecting', resolve));
      void client.connect().catch(() => undefined);
      await retrying;
      const pending = client.ping().then(
        () => 'answered',
        (error: Error) => error.message,
      );
      availability.closeUnreachableAfter(300);
      // Bounded, so that a failure still reaches `finally` and relaunches the server for the next tests.
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still pending'), 20_000)));
      expect(await Promise.race([pending, stuck])).toMatch(/Connection is closed/);
      clearTimeout(timer);
    } finally {
      client.disconnect();
      await server.relaunch();
    }
  });

  /** Closes the module, failing the test if that takes more than 30 s; resolves how long it took. */
  async function timedClose(moduleRef: TestingModule): Promise<number> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), 30_000)));
    try {
      expect(await Promise.race([moduleRef.close().then(() => 'closed' as const), late])).toBe('closed');
    } finally {
      clearTimeout(timer);
    }
    return Date.now() - started;
  }

  it('shutdown during an outage: close() ends once shutdownTimeout has passed without Redis, instead of waiting for it forever (a QueueEvents listener and a flow producer too)', async () => {
    const lines = new Lines();
    const { moduleRef, queue } = await boot(lines, { shutdownTimeout: 1_000, listeners: true });
    let closed = false;
    try {
      await queue.add('sync', { id: 'before' });
      const outage = lines.next(UNREACHABLE);
      await server.kill();
      await outage;
      const took = await timedClose(moduleRef);
      closed = true;
      expect(took).toBeGreaterThanOrEqual(900);
      expect(lines.matching(/at shutdown/)).toHaveLength(1);
    } finally {
      await server.relaunch();
      if (!closed) await moduleRef.close();
      await server.admin.flushall();
    }
  });

  it('Redis down from the start: close() ends after shutdownTimeout (connections that never connected are let go too)', async () => {
    await server.kill();
    const lines = new Lines();
    const outage = lines.next(UNREACHABLE);
    const { moduleRef } = await boot(lines, { shutdownTimeout: 1_000 });
    let closed = false;
    try {
      await outage;
      await timedClose(moduleRef);
      closed = true;
      expect(lines.matching(/at shutdown/)).toHaveLength(1);
    } finally {
      await server.relaunch();
      if (!closed) await moduleRef.close();
      await server.admin.flushall();
    }
  });

  it('Redis back during the shutdown: close() ends as soon as the active job does, nothing is let go', async () => {
    const lines = new Lines();
    const running = deferred();
    const finish = deferred();
    const { moduleRef, queue } = await boot(lines, {
      shutdownTimeout: 20_000,
      handler: async (job) => {
        running.resolve();
        await finish.promise;
        return job.data as unknown;
      },
    });
    let closed = false;
    try {
      const job = await queue.add('sync', { id: 'mid-handler' });
      await running.promise;
      const outage = lines.next(UNREACHABLE);
      await server.kill();
      await outage;
      const closing = timedClose(moduleRef).then(() => (closed = true));
      const back = lines.next(BACK);
      await server.relaunch();
      await back;
      finish.resolve();
      await closing;
      // Nothing let go: the server came back in time. (BullMQ does not record the completion of a job whose
      // connection dropped under it: the job stays active and comes back as stalled; it is not lost.)
      expect(lines.matching(/at shutdown/)).toEqual([]);
      expect(await server.admin.exists(`bull:${queue.name}:${job.id}`)).toBe(1);
    } finally {
      finish.resolve();
      if (!closed) await moduleRef.close();
      await server.admin.flushall();
    }
  });
});
