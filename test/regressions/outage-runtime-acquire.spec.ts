// A run-time lock acquire whose command fails after Redis applied it (ioredis "Command timed out" under
// `commandTimeout`, MaxRetriesPerRequestError, a connection lost after the command was sent): the job's attempt fails,
// and the slot it may hold is given back once BullMQ failed the job for good (not at once: the owner is the job, and a
// stalled copy of it recovered elsewhere may hold that very slot). It used to stay held by the job
// until its lease ended: with one attempt the job failed for good and a later job of the digest was answered as a
// duplicate of it, completing without running. The fault is injected on the library's own client: the script runs on
// Redis, then its answer is replaced by the error a timed-out command gets.
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { useApps } from '../support/apps.js';
import { failScriptAnswerOnce } from '../support/lost-answers.js';
import { byId, digestOf, owners, runningKey } from '../support/locks.js';
import { redisClient } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

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
    const fault = failScriptAnswerOnce(client, 'acquireLock');
    const app = await start({
      module: { connection: client },
      unique: { lock: 'while_executing', lockArgs: byId, runtimeLockLease: 60_000 },
      handler: async (job) => ({ by: job.id }),
    });
    const first = await app.queue.add('sync', { id: 'k' }); // one attempt (BullMQ's default)
    await expect(app.finished(first)).rejects.toThrow('Command timed out');
    expect(fault.failed()).toBe(1);
    expect(app.runs).toHaveLength(0);
    // Given back once BullMQ failed the job for good: nothing held for the digest.
    const digest = digestOf(app, 'sync', { id: 'k' });
    await waitFor(
      'the slot given back',
      async () => (await owners(redis, runningKey(app.prefix, digest))).length === 0,
    );
    const second = await app.queue.add('sync', { id: 'k' });
    expect(await app.finished(second)).toEqual({ by: second.id });
    expect(app.runs.map((job) => job.id)).toEqual([second.id]);
  });
});
