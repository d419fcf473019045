// An @IdempotencyKey claim whose command fails after the store applied it (ioredis "Command timed out" under
// `commandTimeout`, a connection lost after the claim was sent): the attempt fails, and the claim its owner token may
// hold is released (best effort) before the error is thrown. It used to stay held until its lease ended, so the job's
// own retries met "in progress in job <itself>": `onInProgress: 'fail'` failed the job for good, `'delay'` waited a
// whole lease. The fault is injected on the store: the claim runs, then its answer is replaced by an error. The Redis
// store (plain mode), and the SQLite store in transactional mode (a claim, then the transaction).
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { SqliteIdempotencyStore, type IdempotencyJob, type IdempotencyStore } from '../../lib/index.js';
import { RedisIdempotencyStore } from '../../lib/idempotency/stores/redis-idempotency.store.js';
import { useApps } from '../support/apps.js';
import { failScriptAnswerOnce } from '../support/lost-answers.js';
import { redisClient } from '../support/redis.js';

/** Makes the store's next claim apply, then fail as if its answer was lost. */
function failClaimAnswerOnce(store: IdempotencyStore<unknown>): { failed: () => number } {
  const original = store.claim.bind(store);
  let failed = 0;
  store.claim = async (request) => {
    const answer = await original(request);
    if (failed > 0) return answer;
    failed++;
    throw new Error('Connection terminated unexpectedly');
  };
  return { failed: () => failed };
}

const key = (job: IdempotencyJob<{ id: string }>) => job.data.id;
const retried = { attempts: 3, backoff: { type: 'fixed', delay: 50 } };

describe('an idempotency claim that failed after the store applied it', () => {
  const { redis, start } = useApps('outage-claim');
  // The library's client of each test, quit after the apps that use it are closed (it does not close a client it is given).
  const clients: Redis[] = [];
  const directory = mkdtempSync(join(tmpdir(), 'outage-claim-'));
  const databases: Database.Database[] = [];
  afterAll(async () => {
    for (const client of clients.splice(0)) await client.quit();
    for (const database of databases.splice(0)) database.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it.each(['fail', 'delay'] as const)(
    "Redis store, onInProgress '%s': the claim is released, the retry runs the handler once",
    async (onInProgress) => {
      const client = redisClient();
      clients.push(client);
      const fault = failScriptAnswerOnce(client, 'idempotencyClaim');
      // A lease far longer than the test's timeout: a retry that met the orphaned claim would wait it out, or fail.
      const app = await start({
        module: { connection: client },
        idempotency: { key, lease: 600_000, onInProgress },
        handler: async (job) => ({ by: job.id }),
      });
      const job = await app.queue.add('sync', { id: 'k' }, retried);
      expect(await app.finished(job)).toEqual({ by: job.id });
      expect(fault.failed()).toBe(1);
      expect(app.runs).toHaveLength(1);
      const fresh = await app.queue.getJob(job.id!);
      expect(fresh?.attemptsMade).toBe(2);
      expect(fresh?.stacktrace?.[0]).toMatch(/^Error: Command timed out/);
      const record = await new RedisIdempotencyStore({ client: redis, prefix: app.prefix }).get(
        `${app.queue.name}:sync`,
        'k',
      );
      expect(record?.state).toBe('completed');
    },
  );

  it("SQLite store, transactional: the claim is released, the retry runs the handler once (onInProgress 'fail')", async () => {
    const database = new Database(join(directory, 'claims.db'), { timeout: 10_000 });
    databases.push(database);
    const store = new SqliteIdempotencyStore({ database });
    await store.migrate();
    const fault = failClaimAnswerOnce(store);
    const app = await start({
      module: { idempotency: { stores: { sql: store } } },
      idempotency: { key, store: 'sql', transactional: true, lease: 600_000, onInProgress: 'fail' },
      handler: async (job) => ({ by: job.id }),
    });
    const job = await app.queue.add('sync', { id: 'k' }, retried);
    expect(await app.finished(job)).toEqual({ by: job.id });
    expect(fault.failed()).toBe(1);
    expect(app.runs).toHaveLength(1);
    expect((await app.queue.getJob(job.id!))?.attemptsMade).toBe(2);
    expect((await store.get(`${app.queue.name}:sync`, 'k'))?.state).toBe('completed');
  });
});
