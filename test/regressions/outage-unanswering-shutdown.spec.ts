// A Redis that keeps its connections open but stops answering (a paused process: SIGSTOP; a partition that resets
// nothing) while a job is active: the application's shutdown used to wait for it forever. Its clients stay `ready`, so
// they were not taken as out of reach, and BullMQ's worker.close() waits for the job's moveToFinished, which is never
// answered. Now a PING on each connection that runs no blocking command tells it apart: a server that leaves it
// unanswered for `shutdownTimeout` is let go like an unreachable one (its jobs come back as stalled, nothing lost). And a
// server that answers is never let go, even with connections waiting in blocking commands (BZPOPMIN, XREAD BLOCK). On a
// Redis server of the suite's own.
import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it, jest } from '@jest/globals';
import { BullModule, getQueueToken, Processor, QueueEventsHost, QueueEventsListener, WorkerHost } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import { Queue, QueueEvents, type Job } from 'bullmq';
import { UniqueJob, UniqueJobsModule } from '../../lib/index.js';
import { RedisAvailability } from '../../lib/redis/redis-availability.js';
import { deferred, type Deferred } from '../support/deferred.js';
import { captureLogger } from '../support/events.js';
import { PrivateRedis } from '../support/private-redis.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

jest.setTimeout(60_000);

const server = await PrivateRedis.start();
afterAll(async () => {
  server.resume(); // a failed test may leave it paused
  await server.stop();
});
afterEach(async () => {
  server.resume();
  await server.admin.flushall();
});

const LET_GO = /at shutdown/;

/** An application on the suite's server: one guarded queue and a QueueEvents host. */
interface HeldApp {
  moduleRef: TestingModule;
  queue: Queue;
  errors: string[];
  /** Resolved when a job's handler started; its handler returns once `finish` is resolved. */
  running: Deferred;
  finish: Deferred;
}

async function boot(shutdownTimeout: number): Promise<HeldApp> {
  const running = deferred();
  const finish = deferred();
  const handler = async (job: Job) => {
    running.resolve();
    await finish.promise;
    return job.data as unknown;
  };
  const name = uniqueName('unanswering');
  // Concurrency 2: while one job runs, the worker's blocking connection waits in BZPOPMIN for the next (a minute).
  @Processor(name, { concurrency: 2, drainDelay: 60 })
  @UniqueJob({ lock: 'until_executed', lockArgs: (data: { id: string }) => data.id })
  class PausedProcessor extends WorkerHost {
    process(job: Job): Promise<unknown> {
      return handler(job);
    }
  }
  @QueueEventsListener(name, { blockingTimeout: 60_000 })
  class PausedEvents extends QueueEventsHost {}
  const { logger, lines } = captureLogger();
  const moduleRef = await Test.createTestingModule({
    imports: [
      BullModule.forRoot({ connection: { host: '127.0.0.1', port: server.port } }),
      BullModule.registerQueue({ name }),
      UniqueJobsModule.forRoot({ logger, shutdownTimeout, prefix: uniqueName('ujpaused') }),
    ],
    providers: [PausedProcessor, PausedEvents],
  }).compile();
  await moduleRef.init();
  return { moduleRef, queue: moduleRef.get<Queue>(getQueueToken(name)), errors: lines.error, running, finish };
}

/** Closes the module; `'late'` if that takes more than `boundMs`. Resolves how long it took. */
async function boundedClose(
  moduleRef: TestingModule,
  boundMs: number,
): Promise<{ end: 'closed' | 'late'; took: number }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), boundMs)));
  try {
    const end = await Promise.race([moduleRef.close().then(() => 'closed' as const), late]);
    return { end, took: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a client of the server is in the middle of `command` (CLIENT LIST's `cmd`). */
async function blockedIn(command: string): Promise<boolean> {
  return String(await server.admin.client('LIST')).includes(`cmd=${command}`);
}

describe('shutdown with a Redis that keeps its connections but does not answer', () => {
  it('a paused server while a job is active: close() ends soon after shutdownTimeout, naming the server, and the job is not lost', async () => {
    const { moduleRef, queue, errors, running, finish } = await boot(1_000);
    let closed = false;
    try {
      const job = await queue.add('sync', { id: 'paused' });
      await running.promise;
      server.pause();
      const closing = boundedClose(moduleRef, 15_000);
      finish.resolve(); // the job's bookkeeping and moveToFinished now wait for the paused server
      const { end, took } = await closing;
      expect(end).toBe('closed');
      closed = true;
      // shutdownTimeout, then at most ioredis' disconnectTimeout (2 s) for the sockets the server does not close.
      expect(took).toBeGreaterThanOrEqual(900);
      expect(errors.filter((line) => LET_GO.test(line))).toEqual([
        expect.stringContaining(`Redis 127.0.0.1:${server.port} does not answer at shutdown`),
      ]);
      server.resume();
      // Not lost: still active (it comes back as stalled), or completed if the server, resumed, carried out the
      // moveToFinished it had received before its connection was closed.
      const key = `bull:${queue.name}`;
      expect(await server.admin.exists(`${key}:${job.id}`)).toBe(1);
      const active = (await server.admin.lrange(`${key}:active`, 0, -1)).includes(job.id!);
      const completed = (await server.admin.zscore(`${key}:completed`, job.id!)) !== null;
      expect(active || completed).toBe(true);
    } finally {
      finish.resolve();
      server.resume();
      if (!closed) await moduleRef.close();
    }
  });

  it.each([
    ['a server that answers, with connections waiting in BZPOPMIN and XREAD BLOCK', () => sleep(1_500)],
    [
      'a server that stops answering for five times shutdownTimeout (a disk or fork stall) and comes back',
      async () => {
        server.pause();
        await sleep(1_500);
        server.resume();
      },
    ],
  ])('not let go while a handler runs: %s; the job is recorded', async (_label, whileRunning) => {
    const { moduleRef, queue, errors, running, finish } = await boot(300);
    let closed = false;
    try {
      const job = await queue.add('sync', { id: 'held' });
      await running.promise;
      await waitFor('the blocking reads', async () => (await blockedIn('bzpopmin')) && (await blockedIn('xread')));
      const closing = boundedClose(moduleRef, 15_000);
      // The job outlasts the shutdown timeout five times over: what is tested is that span, no event marks it.
      await whileRunning();
      finish.resolve();
      expect((await closing).end).toBe('closed');
      closed = true;
      expect(errors.filter((line) => LET_GO.test(line))).toEqual([]);
      expect(await server.admin.zscore(`bull:${queue.name}:completed`, job.id!)).not.toBeNull();
    } finally {
      finish.resolve();
      server.resume();
      if (!closed) await moduleRef.close();
    }
  });

  it('a slow server that answers each PING within shutdownTimeout is not let go, with no handler running', async () => {
    const { logger, lines } = captureLogger();
    const availability = new RedisAvailability(logger, 300);
    const queue = new Queue(uniqueName('slow-alive'), { connection: { host: '127.0.0.1', port: server.port } });
    const busy = server.admin.duplicate();
    try {
      availability.watch(queue);
      await queue.waitUntilReady();
      availability.closeUnreachableAfter(300);
      // The server is busy 200 ms at a time for five times the timeout: each PING waits, none goes unanswered 300 ms.
      for (let i = 0; i < 8; i++) await busy.call('DEBUG', 'SLEEP', '0.2');
      expect(lines.error).toEqual([]);
      expect(availability.connectionsLetGo).toBe(false);
      expect(await queue.count()).toBe(0); // its connection still works
    } finally {
      busy.disconnect();
      await queue.close();
    }
  });

  it('a server whose only connections wait in a blocking command is not taken as silent (no PING is sent on them)', async () => {
    const { logger, lines } = captureLogger();
    const availability = new RedisAvailability(logger, 300);
    const events = new QueueEvents(uniqueName('blocking-only'), {
      connection: { host: '127.0.0.1', port: server.port },
      blockingTimeout: 60_000,
    });
    try {
      availability.watch(events);
      await events.waitUntilReady();
      await waitFor('the XREAD BLOCK', () => blockedIn('xread'));
      availability.closeUnreachableAfter(300);
      // Five times the timeout: a PING queued behind the minute-long XREAD would have been taken as unanswered by then.
      await sleep(1_500);
      expect(lines.error).toEqual([]);
      expect(availability.connectionsLetGo).toBe(false);
      expect(await blockedIn('xread')).toBe(true);
    } finally {
      await events.close();
    }
  });
});
