// A run-time lock acquire whose command fails after Redis applied it (ioredis "Command timed out" under
// `commandTimeout`, MaxRetriesPerRequestError, a connection lost after the command was sent): the job's attempt fails,
// and the slot it may hold is given back (owner-checked) before the error is thrown. It used to stay held by the job
// until its lease ended: with one attempt the job failed for good and a later job of the digest was answered as a
// duplicate of it, completing without running. The fault is injected on the library's own client: the script runs on
// Redis, then its answer is replaced by the error a timed-out command gets.
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Cluster, Redis } from 'ioredis';
import { RedisScripts, scriptSources, type ScriptName } from '../../lib/redis/redis-scripts.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, runningKey } from '../support/locks.js';
import { redisClient } from '../support/redis.js';

/** Makes the next call of script `name` on `client` apply on Redis, then fail as a timed-out command does. */
function failAnswerOnce(client: Redis | Cluster, name: ScriptName): { failed: () => number } {
  new RedisScripts(client); // defines the library's commands on the client (the module reuses them)
  const { command } = scriptSources().find((source) => source.name === name) as unknown as { command: string };
  const commands = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = commands[command];
  let failed = 0;
  commands[command] = async function (this: unknown, ...args: unknown[]) {
    const answer = await original.apply(this, args);
    if (failed > 0) return answer;
    failed++;
    throw new Error('Command timed out');
  };
  return { failed: () => failed };
}

describe('a run-time lock acquire that failed after Redis applied it', () => {
  const { redis, start } = useApps('outage-acquire');
  // The library's client of each test, quit after the apps that use it are closed (it does not close a client it is given).
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const client of clients.splice(0)) await client.quit();
  });

  it('the attempt fails, its slot is given back, and a later job of the digest runs', async () => {
    const client = redisClient();
    clients.push(client);
    const fault = failAnswerOnce(client, 'acquireLock');
    const app = await start({
      module: { connection: client },
      unique: { lock: 'while_executing', lockArgs: byId, runtimeLockLease: 60_000 },
      handler: async (job) => ({ by: job.id }),
    });
    const first = await app.queue.add('sync', { id: 'k' }); // one attempt (BullMQ's default)
    await expect(app.finished(first)).rejects.toThrow('Command timed out');
    expect(fault.failed()).toBe(1);
    expect(app.runs).toHaveLength(0);
    // Given back before the attempt failed: nothing held for the digest.
    const digest = digestOf(app, 'sync', { id: 'k' });
    expect(await owners(redis, runningKey(app.prefix, digest))).toEqual([]);
    const second = await app.queue.add('sync', { id: 'k' });
    expect(await app.finished(second)).toEqual({ by: second.id });
    expect(app.runs.map((job) => job.id)).toEqual([second.id]);
  });
});
