// A run-time lock acquire whose answer is read only after the lease it took has ended (an event-loop stall between the
// send and the read: another job's CPU-bound handler in the same process). The job asks again at once: it does not
// start its handler when another job took the lock over meanwhile, and holds a fresh lease when nobody did. It used to
// start the handler on the lease that had ended (detected only afterwards, as `lockLost`), beside the other holder.
// The stall is simulated on the library's own client: the acquire is applied by Redis, and its answer handed back
// only once its lease has ended on the server (and, in the first case, another owner has taken the lock).
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RedisScripts, scriptSources } from '../../lib/redis/redis-scripts.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { byId, owners } from '../support/locks.js';
import { redisClient } from '../support/redis.js';

const LEASE_MS = 1_000;

/**
 * Hands the answer of the first `acquireLock` call on `client` back late: after Redis applied it, once `meanwhile`
 * resolves (given the lock's key) and more than `LEASE_MS` after the call.
 */
function answerFirstAcquireLate(client: Redis, meanwhile: (key: string) => Promise<void>): { late: () => number } {
  new RedisScripts(client); // defines the library's commands on the client (the module reuses them)
  const { command } = scriptSources().find((source) => source.name === 'acquireLock') as unknown as { command: string };
  const commands = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = commands[command];
  let late = 0;
  commands[command] = async function (this: unknown, ...args: unknown[]) {
    const calledAt = Date.now();
    const answer = await original.apply(this, args);
    if (late > 0) return answer;
    late++;
    await meanwhile(String(args[0]));
    while (Date.now() - calledAt <= LEASE_MS) await new Promise((resolve) => setTimeout(resolve, 10));
    return answer;
  };
  return { late: () => late };
}

describe('a run-time lock acquire answered after its lease ended', () => {
  const { redis, start } = useApps('outage-late');
  const intruder = new LockStore(new RedisScripts(redis));
  // The library's client of each test, quit after the apps that use it are closed (it does not close a client it is given).
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const client of clients.splice(0)) await client.quit();
  });

  /** Polls until `owner` takes the lock (once the job's lease has ended on the server: limit 1). */
  async function takeOver(key: string, owner: string): Promise<void> {
    while (!(await intruder.acquire(key, owner, 60_000, 1)).acquired) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('another job took the lock meanwhile: the handler does not start', async () => {
    const client = redisClient();
    clients.push(client);
    let runningKey = '';
    const stall = answerFirstAcquireLate(client, async (key) => {
      runningKey = key;
      await takeOver(key, 'intruder');
    });
    const app = await start({
      module: { connection: client },
      unique: { lock: 'while_executing', lockArgs: byId, runtimeLockLease: LEASE_MS },
      handler: async (job) => ({ by: job.id }),
    });
    const job = await app.queue.add('sync', { id: 'k' });
    await app.finished(job).catch(() => undefined); // a conflict: however the strategy ends it
    expect(stall.late()).toBe(1);
    expect(app.runs).toHaveLength(0);
    // The other holder keeps the lock; the job holds nothing.
    expect(await owners(redis, runningKey)).toEqual(['intruder']);
  });

  it('nobody took the lock meanwhile: the handler runs on a fresh lease, no lease reported lost', async () => {
    const client = redisClient();
    clients.push(client);
    const stall = answerFirstAcquireLate(client, async (key) => {
      // The lease has ended on the server: a probe owner takes the lock (so it had), then gives it back.
      await takeOver(key, 'probe');
      await redis.zrem(key, 'probe');
    });
    const app = await start({
      module: { connection: client },
      unique: { lock: 'while_executing', lockArgs: byId, runtimeLockLease: LEASE_MS },
      handler: async (job) => ({ by: job.id }),
    });
    const events = new EventLog(app);
    const job = await app.queue.add('sync', { id: 'k' });
    expect(await app.finished(job)).toEqual({ by: job.id });
    expect(stall.late()).toBe(1);
    expect(app.runs.map((run) => run.id)).toEqual([job.id]);
    // A lease found ended is reported as the lock is given back, before BullMQ records the job completed.
    expect(events.of('lockLost')).toEqual([]);
  });
});
