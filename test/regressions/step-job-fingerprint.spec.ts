// Regression (hostile review): BullMQ's step jobs. A handler under @IdempotencyKey records its progress with
// `job.updateData({ ...job.data, step: 2 })`, so the payload's fingerprint, read from the job's data at each delivery,
// no longer matches the one its claim stored. When BullMQ delivers that same job again (its worker died; or after its
// record was completed), the job failed for good with IdempotencyKeyMismatchError and could never finish. On the Redis
// store, which keeps the claiming job's key (queue and id), a claim of the job the record names is now that job's own;
// a different job with another payload and the same key is still refused as a mismatch. The SQL stores keep a job id
// only, which cannot tell two queues' jobs apart (the review of this very change found a job "1" of another queue
// sharing the scope replayed or taken over): there payloads are compared whoever claims, and a step job takes
// `fingerprint` fields its handler does not update.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue, QueueEvents, type Job } from 'bullmq';
import {
  idempotencyOf,
  PostgresIdempotencyStore,
  RedisIdempotencyStore,
  SqliteIdempotencyStore,
  type IdempotencyStore,
} from '../../lib/index.js';
import type { HeldRun, StepData } from '../fixtures/idempotency-worker.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { spawnFixture } from '../support/fixtures.js';
import { Leftovers } from '../support/leftovers.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { bullOptions, lastEventId, redisClient, uniqueName } from '../support/redis.js';

const MISMATCH = /already used with a different payload/;

describe('a step job (job.updateData) under @IdempotencyKey', () => {
  const redis = redisClient();
  const pool = pgPool(4);
  const table = uniqueTable('idem_step');
  const pgStore = new PostgresIdempotencyStore({ pool, table });
  const directory = mkdtempSync(join(tmpdir(), 'idem-step-'));
  const database = new Database(join(directory, 'idem.db'), { timeout: 5_000 });
  const sqliteStore = new SqliteIdempotencyStore({ database });
  const leftovers = new Leftovers(redis, pool);
  const apps = useApps('idem-step');

  beforeAll(async () => {
    await pgStore.migrate();
    await sqliteStore.migrate();
  });
  afterEach(() => leftovers.cleanUp());
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
    await redis.quit();
    database.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it.each([
    ['redis', 'the whole data'],
    ['postgres', "fields the handler does not update (['key', 'amount'])"],
  ] as const)(
    '%s store (plain mode), fingerprint of %s: its worker SIGKILLed after updateData, BullMQ delivers the same job again; it takes its claim over and completes, one effect; a different job with another payload is still a mismatch',
    async (storeKind, _fingerprint) => {
      const queueName = uniqueName('idem-step');
      const prefix = uniqueName('ujstep');
      const probe = uniqueName('probe-step');
      leftovers.namespaces.push(prefix, probe);
      const effects = uniqueTable('step_effects');
      leftovers.tables.push(effects);
      await pool.query(
        `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, key text NOT NULL, job_id text NOT NULL,
          worker text NOT NULL, takeover boolean NOT NULL)`,
      );
      const queue = new Queue(queueName, bullOptions());
      const events = new QueueEvents(queueName, { ...bullOptions(), lastEventId: await lastEventId(queue) });
      leftovers.queues.push(queue);
      leftovers.queueEvents.push(events);
      await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
      const env = {
        QUEUE: queueName,
        PREFIX: prefix,
        PROBE: probe,
        MODE: 'step',
        STORE: storeKind,
        IDEM_TABLE: table,
        EFFECTS_TABLE: effects,
        CONCURRENCY: '1',
        LEASE: '1000',
        // A's job lock lasts 1 s, so its job comes back about a second after the kill (as in crash-recovery.spec.ts).
        LOCK_DURATION: '1000',
        STALLED_INTERVAL: '300',
        ...(storeKind === 'postgres' ? { FINGERPRINT: 'key,amount' } : {}),
      };
      const worker = (extra: Record<string, string>) => {
        const fixture = spawnFixture('idempotency-worker', { ...env, ...extra });
        leftovers.fixtures.push(fixture);
        return fixture;
      };

      // Worker A claims the key, does step 1 (the effect), records step 2 in the job's data, and hangs.
      const a = worker({ LABEL: 'A', HOLD: 'hang' });
      await a.waitFor((m) => m.ready === true);
      const job = await queue.add('step', { key: 'K', amount: 10 } satisfies StepData);
      expect((await a.waitFor((m) => 'held' in m)).held).toEqual({
        worker: 'A',
        jobId: job.id,
        key: 'K',
        takeover: false,
      });
      expect((await queue.getJob(job.id!))?.data).toEqual({ key: 'K', amount: 10, step: 2 });

      // A is SIGKILLed; B gets the same job (same id, its data at step 2) once BullMQ sees it stalled.
      const b = worker({ LABEL: 'B', LOCK_DURATION: '10000' });
      await b.waitFor((m) => m.ready === true);
      a.child.kill('SIGKILL');
      expect(await a.exited).toMatchObject({ signal: 'SIGKILL' });
      const result = (await job.waitUntilFinished(events, 30_000)) as HeldRun;
      expect(result).toEqual({ worker: 'B', jobId: job.id, key: 'K', takeover: true });
      expect((await queue.getJob(job.id!))?.stalledCounter).toBe(1);

      // One effect: A's step 1; B skipped it. The record is completed, taken over once.
      const { rows } = await pool.query(`SELECT key, job_id, worker FROM ${effects}`);
      expect(rows).toEqual([{ key: 'K', job_id: job.id, worker: 'A' }]);
      const store = storeKind === 'redis' ? new RedisIdempotencyStore({ client: redis, prefix }) : pgStore;
      const record = await store.get(`${queueName}:step`, 'K');
      expect(record).toMatchObject({ state: 'completed', attempts: 2, jobId: job.id });
      expect(JSON.parse(record!.result!)).toEqual(result);

      // The record kept the fingerprint of the payload the producer sent (not of the data at step 2): another job
      // sending that payload again is a duplicate, replayed.
      const again = await queue.add('step', { key: 'K', amount: 10 } satisfies StepData);
      expect(await again.waitUntilFinished(events, 30_000)).toEqual(result);
      // Another job of the key with another payload is a producer's mistake, not the same job: refused, nothing runs.
      const other = await queue.add('step', { key: 'K', amount: 99 } satisfies StepData);
      await expect(other.waitUntilFinished(events, 30_000)).rejects.toThrow(MISMATCH);
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${effects}`)).rows).toEqual([{ n: 1 }]);
    },
    60_000,
  );

  type StoreKind = 'redis' | 'postgres' | 'postgres transactional' | 'sqlite';

  /**
   * An app whose handler does step 1 (counted in `steps`), records step 2 with updateData, and returns its job id. On
   * the SQL stores the fingerprint is of fields the handler does not update (they compare payloads whoever claims).
   */
  const startStepApp = async (storeKind: StoreKind, options: { prefix?: string; scope?: string } = {}) => {
    const store = { redis: undefined, postgres: pgStore, 'postgres transactional': pgStore, sqlite: sqliteStore }[
      storeKind
    ];
    const steps: string[] = [];
    const app = await apps.start({
      module: {
        ...(options.prefix ? { prefix: options.prefix } : {}),
        ...(store ? { idempotency: { stores: { sql: store } } } : {}),
      },
      idempotency: {
        key: (job) => (job.data as StepData).key,
        ...(options.scope ? { scope: options.scope } : {}),
        ...(store
          ? { store: 'sql', transactional: storeKind === 'postgres transactional', fingerprint: ['key', 'amount'] }
          : {}),
      },
      handler: async (job: Job<StepData>) => {
        if (job.data.step === undefined) {
          steps.push(job.id!);
          await job.updateData({ ...job.data, step: 2 });
        }
        return { ranIn: job.id, takeover: idempotencyOf(job).takeover };
      },
    });
    const reader: IdempotencyStore = store ?? new RedisIdempotencyStore({ client: apps.redis, prefix: app.prefix });
    return { app, steps, store: reader, scope: options.scope ?? `${app.queue.name}:step` };
  };

  it.each(['redis', 'postgres', 'postgres transactional', 'sqlite'] as const)(
    '%s: the same job delivered again after its record was completed (data updated since) replays it; a different job with another payload is a mismatch',
    async (storeKind) => {
      const { app, steps, store, scope } = await startStepApp(storeKind);
      const log = new EventLog(app);
      const job = await app.queue.add('step', { key: 'K', amount: 10 } satisfies StepData);
      expect(await app.finished(job)).toEqual({ ranIn: job.id, takeover: false });
      const record = await store.get(scope, 'K');
      expect(record).toMatchObject({ state: 'completed', jobId: job.id });

      // BullMQ runs the completed job again (as when its worker died after the record was completed and before BullMQ
      // recorded the completion): same id, its data now at step 2. The handler is not called; the result is replayed.
      await job.retry('completed');
      expect(await app.finished(job.id!)).toEqual({ ranIn: job.id, takeover: false });
      expect(app.runs).toHaveLength(1);
      expect(log.of('idempotencyReplayed')).toMatchObject([{ jobId: job.id, state: 'completed' }]);
      expect(await store.get(scope, 'K')).toMatchObject({ state: 'completed', fingerprint: record!.fingerprint });

      const other = await app.queue.add('step', { key: 'K', amount: 99 } satisfies StepData);
      await expect(app.finished(other)).rejects.toThrow(MISMATCH);
      expect(log.of('idempotencyMismatch')).toMatchObject([{ jobId: other.id }]);
      expect(steps).toEqual([job.id]);
    },
  );

  // Found by the review of this change: BullMQ numbers each queue's jobs from 1, so two queues sharing a scope both
  // have a job "1"; a job id alone took one for the other (a replay of another payload's result, or its ended claim
  // taken over).
  it.each(['redis', 'postgres', 'sqlite'] as const)(
    '%s: job "1" of another queue sharing the scope, with another payload, is a mismatch',
    async (storeKind) => {
      const prefix = uniqueName('ujstep');
      const scope = uniqueName('shared-scope');
      const a = await startStepApp(storeKind, { prefix, scope });
      const b = await startStepApp(storeKind, { prefix, scope });
      const first = await a.app.queue.add('step', { key: 'E', amount: 10 } satisfies StepData);
      expect(await a.app.finished(first)).toEqual({ ranIn: '1', takeover: false });
      const second = await b.app.queue.add('step', { key: 'E', amount: 99 } satisfies StepData);
      expect(second.id).toBe('1');
      await expect(b.app.finished(second)).rejects.toThrow(MISMATCH);
      expect(b.steps).toEqual([]);
    },
  );

  // Found by the second look at this change: the job key alone took a new job given a removed job's custom id for it
  // (its record replayed to another payload); the job's creation time tells them apart.
  it('redis: a new job given the custom id of a removed one, with another payload, is a mismatch', async () => {
    const { app, store, scope } = await startStepApp('redis');
    const log = new EventLog(app);
    const first = await app.queue.add(
      'step',
      { key: 'K', amount: 10, step: 2 },
      { jobId: 'order-1', removeOnComplete: true },
    );
    expect(await app.finished(first)).toEqual({ ranIn: 'order-1', takeover: false });
    expect(await store.get(scope, 'K')).toMatchObject({ state: 'completed', jobId: 'order-1' });
    expect(await app.queue.getJob('order-1')).toBeUndefined();
    const reused = await app.queue.add('step', { key: 'K', amount: 99, step: 2 }, { jobId: 'order-1' });
    await expect(app.finished(reused)).rejects.toThrow(MISMATCH);
    expect(log.of('idempotencyReplayed')).toEqual([]);
  });

  it('redis: an ended claim (its holder died) of another payload is taken over by the job it names, keeping its fingerprint, and refused to any other job, one of another queue with the same id included', async () => {
    const { app, steps, store, scope } = await startStepApp('redis');
    const jobKey = (queue: string, id: string) => `${app.queue.qualifiedName.replace(app.queue.name, queue)}:${id}`;
    // A claim of a delivery that died, its lease ended; the payload it was claimed with is not the job's data now. The
    // jobs below are added with that creation time (BullMQ's `timestamp` option), as the job that claimed would have.
    const createdAt = Date.now() - 60_000;
    const crashed = (key: string, jobId: string, queue = app.queue.name) =>
      store.claim({
        scope,
        key,
        owner: `crashed-${key}`,
        leaseMs: 100,
        fingerprint: 'sha256:step-1',
        jobId,
        jobKey: jobKey(queue, jobId),
        jobCreatedAt: createdAt,
      });
    await crashed('K', 'mine');
    await crashed('T', 'twin', uniqueName('other-queue'));
    await sleep(250);

    // Another job of the key: a mismatch, nothing runs (the claim is not taken over).
    const theirs = await app.queue.add('step', { key: 'K', amount: 2 }, { jobId: 'theirs', timestamp: createdAt });
    await expect(app.finished(theirs)).rejects.toThrow(MISMATCH);
    // The job the claim names (its data at step 2 now), delivered again: takes its claim over and completes, keeping
    // the fingerprint of the payload its claim was first made with.
    const mine = await app.queue.add('step', { key: 'K', amount: 1, step: 2 }, { jobId: 'mine', timestamp: createdAt });
    expect(await app.finished(mine)).toEqual({ ranIn: 'mine', takeover: true });
    expect(await store.get(scope, 'K')).toMatchObject({
      state: 'completed',
      attempts: 2,
      jobId: 'mine',
      fingerprint: 'sha256:step-1',
    });
    // A job of this queue with the id of a job of another queue that shares the scope: told apart by the job key.
    const twin = await app.queue.add('step', { key: 'T', amount: 1 }, { jobId: 'twin', timestamp: createdAt });
    await expect(app.finished(twin)).rejects.toThrow(MISMATCH);
    expect(steps).toEqual([]);
  });
});
