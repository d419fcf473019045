// Settling in order: the run-time lock's release and the idempotency record's completion are sent on the connection
// the worker records the job's outcome on, before BullMQ's `moveToFinished`, so they take effect first without the
// worker waiting for their answers (docs/performance.md). Observed with Redis MONITOR, which streams the commands in
// the order the server ran them and names the connection that sent each. On a single Redis only: on a cluster the
// library waits for both answers instead (the lock and idempotency suites run there).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisIdempotencyStore } from '../lib/index.js';
import type { TestApp } from './support/app.js';
import { useApps } from './support/apps.js';
import { EventLog } from './support/events.js';
import { byId, digestOf, runningKey, runtimeOwner } from './support/locks.js';
import { ownRedisForFile } from './support/own-redis.js';
import { deleteKeys, redisClient, redisOptions, scanKeys, uniqueName } from './support/redis.js';

// MONITOR streams every command the server runs: on a Redis that other clients use, their traffic interleaves with
// its replies and ioredis loses track of them. This suite gets a server of its own for the file.
const server = await ownRedisForFile();

/** One command as MONITOR reports it. */
interface Seen {
  args: string[];
  source: string;
  database: number;
}

/**
 * A connection in monitoring mode. ioredis takes it as monitoring only once MONITOR's answer is handled: a command of
 * another client that the server runs right after MONITOR, read in the same chunk as that answer (the app's waiting
 * deliveries listener subscribing, which the bootstrap does not wait for), fails the opening ("Command queue state
 * error"); another connection is opened then (what it saw was before this one's start).
 */
async function openMonitoring(): Promise<Redis> {
  for (let attempt = 1; ; attempt++) {
    const client = redisClient({ monitor: true });
    try {
      await new Promise<void>((resolve, reject) => {
        client.once('monitoring', () => resolve());
        client.on('error', reject);
      });
      return client;
    } catch (error) {
      client.disconnect();
      if (attempt === 10 || !String(error).includes('Command queue state error')) throw error;
    }
  }
}

/** Every command the server runs from now on, in its order (commands run by scripts left out). */
class Monitor {
  readonly seen: Seen[] = [];
  private constructor(private readonly client: Redis) {}

  static async open(): Promise<Monitor> {
    const client = await openMonitoring();
    const monitor = new Monitor(client);
    client.on('monitor', (_time: string, args: string[], source: string, database: string) => {
      if (source !== 'lua') monitor.seen.push({ args, source, database: Number(database) });
    });
    return monitor;
  }

  /** Waits until every command the server ran before this call has been reported (a marker PING passes through). */
  async caughtUp(redis: Redis): Promise<void> {
    const marker = uniqueName('caught-up');
    const passed = new Promise<void>((resolve) => {
      const onCommand = (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'ping' && args[1] === marker) {
          this.client.off('monitor', onCommand);
          resolve();
        }
      };
      this.client.on('monitor', onCommand);
    });
    await redis.ping(marker);
    await passed;
  }

  /** The index of the first command matching `predicate`, or -1. */
  indexOf(predicate: (command: Seen) => boolean): number {
    return this.seen.findIndex(predicate);
  }

  async close(): Promise<void> {
    this.client.disconnect();
  }
}

const isScript = (command: Seen, name: 'eval' | 'evalsha') => command.args[0]?.toLowerCase() === name;
/** BullMQ's `moveToFinished` of a job: the script call that names the job's key and its target state `completed`. */
const finishes = (app: TestApp, jobId: string) => (command: Seen) =>
  (isScript(command, 'evalsha') || isScript(command, 'eval')) &&
  command.args.includes(`${app.queue.qualifiedName}:${jobId}`) &&
  command.args.includes('completed');

describe('settling in order on the worker connection', () => {
  const { redis, start, onCleanup } = useApps('ord');

  async function monitorFor(): Promise<Monitor> {
    const monitor = await Monitor.open();
    onCleanup(() => monitor.close());
    return monitor;
  }

  /**
   * Runs jobs one by one until one is settled on the worker's connection (the first jobs of a worker wait for the
   * answers while the library learns that the worker's connection reaches the lock's server), then `count` more.
   */
  async function runUntilInOrder(
    app: TestApp,
    monitor: Monitor,
    settles: (command: Seen, job: Job) => boolean,
    count: number,
  ): Promise<Job[]> {
    for (let warmUp = 0; ; warmUp++) {
      const job = await app.queue.add('sync', { id: `warm-${warmUp}` });
      await app.finished(job);
      await monitor.caughtUp(redis);
      const { settle, finish } = positions(app, monitor, job, settles);
      if (settle !== -1 && monitor.seen[settle].source === monitor.seen[finish]?.source) break;
      if (warmUp === 20) throw new Error('no job was settled on the worker connection after 20 jobs');
    }
    const jobs: Job[] = [];
    for (let i = 0; i < count; i++) {
      const job = await app.queue.add('sync', { id: `job-${i}` });
      await app.finished(job);
      jobs.push(job);
    }
    await monitor.caughtUp(redis);
    return jobs;
  }

  /** Where a job's settling command and BullMQ's completion of it are among the commands seen (-1: not seen). */
  function positions(
    app: TestApp,
    monitor: Monitor,
    job: Job,
    settles: (command: Seen, job: Job) => boolean,
  ): { settle: number; finish: number } {
    return {
      settle: monitor.indexOf((command) => settles(command, job)),
      finish: monitor.indexOf(finishes(app, job.id!)),
    };
  }

  /** For each job: its settling command comes before BullMQ's completion of it, from the same connection. */
  function expectSettledBeforeCompletion(
    app: TestApp,
    monitor: Monitor,
    jobs: Job[],
    settles: (command: Seen, job: Job) => boolean,
  ): void {
    for (const job of jobs) {
      const { settle, finish } = positions(app, monitor, job, settles);
      expect(settle).toBeGreaterThanOrEqual(0);
      expect(finish).toBeGreaterThan(settle);
      // One connection: Redis runs its commands in the order they were sent.
      expect(monitor.seen[settle].source).toBe(monitor.seen[finish].source);
    }
  }

  it("while_executing: each job's run-time lock is released on the worker's connection, before BullMQ completes the job", async () => {
    const app = await start({ unique: { lock: 'while_executing', lockArgs: byId } });
    const events = new EventLog(app);
    const monitor = await monitorFor();
    const lockOf = (job: Job) => runningKey(app.prefix, digestOf(app, 'sync', job.data));
    // The job's own slot removed by the compare-and-set script (owner and the lease its take wrote), sent by source.
    const releases = (command: Seen, job: Job) =>
      isScript(command, 'eval') &&
      command.args.includes(lockOf(job)) &&
      command.args.includes(runtimeOwner(app, job.id!));

    const jobs = await runUntilInOrder(app, monitor, releases, 5);

    expectSettledBeforeCompletion(app, monitor, jobs, releases);
    for (const job of jobs) expect(await redis.exists(lockOf(job))).toBe(0);
    // The answers are still read: every release is reported.
    const ids = jobs.map((job) => job.id);
    await events.next((event) => event.type === 'unlocked' && event.jobId === ids.at(-1));
    expect(events.of('unlocked').filter((event) => ids.includes(event.jobId))).toHaveLength(ids.length);
  });

  it("@IdempotencyKey on Redis: each record is completed on the worker's connection, before BullMQ completes the job", async () => {
    const idOf = (job: Job) => (job.data as { id: string }).id;
    const app = await start({ idempotency: { key: idOf }, handler: async (job) => `done ${idOf(job)}` });
    const events = new EventLog(app);
    const monitor = await monitorFor();
    const completes = (command: Seen, job: Job) =>
      isScript(command, 'eval') &&
      command.args.includes('completed') &&
      command.args.includes(JSON.stringify(`done ${idOf(job)}`));

    const jobs = await runUntilInOrder(app, monitor, completes, 5);

    expectSettledBeforeCompletion(app, monitor, jobs, completes);
    const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
    for (const job of jobs) {
      await expect(store.get(`${app.queue.name}:sync`, idOf(job))).resolves.toMatchObject({
        state: 'completed',
        result: JSON.stringify(`done ${idOf(job)}`),
      });
    }
    const ids = jobs.map((job) => job.id);
    await events.next((event) => event.type === 'idempotencyCompleted' && event.jobId === ids.at(-1));
    expect(events.of('idempotencyCompleted').filter((event) => ids.includes(event.jobId))).toHaveLength(ids.length);
  });

  it("waits for the answers when the store's client names keys with an ioredis keyPrefix the worker's has not", async () => {
    const idOf = (job: Job) => (job.data as { id: string }).id;
    const prefixed = redisClient({ keyPrefix: 'kp:' });
    onCleanup(async () => void (await prefixed.quit()));
    const prefix = uniqueName('ujt');
    const store = new RedisIdempotencyStore({ client: prefixed, prefix });
    const app = await start({ idempotency: { key: idOf }, module: { prefix, idempotency: { store } } });
    const events = new EventLog(app);
    // Past the first jobs, whose completion waits anyway while the library compares the two connections.
    for (let i = 0; i < 8; i++) {
      const job = await app.queue.add('sync', { id: `job-${i}` });
      await app.finished(job);
      await events.next((event) => event.type === 'idempotencyCompleted' && event.jobId === job.id);
      await expect(store.get(`${app.queue.name}:sync`, `job-${i}`)).resolves.toMatchObject({ state: 'completed' });
    }
    expect(events.of('idempotencyLeaseLost')).toEqual([]);
    await deleteKeys(redis, await scanKeys(redis, `kp:${prefix}:*`));
  });

  it("waits for the answers when the library's connection cannot tell it reaches the worker's server (INFO not allowed)", async () => {
    // A user refused INFO (a managed Redis' restricted user): the library cannot learn that its connection and the
    // worker's reach one server, so it sends the lock's commands on its own and waits for their answers.
    await server.admin.call('ACL', 'SETUSER', 'noinfo', 'reset', 'on', '>pw', '~*', '&*', '+@all', '-info');
    onCleanup(async () => void (await server.admin.call('ACL', 'DELUSER', 'noinfo')));
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId },
      module: { connection: { ...redisOptions(), username: 'noinfo', password: 'pw' } },
    });
    const monitor = await monitorFor();
    for (let i = 0; i < 5; i++) {
      const job = await app.queue.add('sync', { id: `job-${i}` });
      await app.finished(job);
      await monitor.caughtUp(redis);
      const lock = runningKey(app.prefix, digestOf(app, 'sync', job.data));
      // Taken and released on the library's own connection, never sent on the worker's.
      const commands = monitor.seen.filter((command) => command.args.includes(lock));
      const finish = monitor.seen[monitor.indexOf(finishes(app, job.id!))];
      expect(commands).toHaveLength(2);
      for (const command of commands) expect(command.source).not.toBe(finish.source);
      expect(await redis.exists(lock)).toBe(0);
    }
  });
});
