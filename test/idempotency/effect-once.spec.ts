// Effect-once across real processes: worker processes (test/fixtures/idempotency-worker.ts, compiled by `npm test`)
// consume plain BullMQ jobs (no @UniqueJob, so every duplicate delivery reaches a worker) under @IdempotencyKey, and
// write their effect into a PostgreSQL table that has no unique constraint: a double effect would show as a second row.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, QueueEvents } from 'bullmq';
import { RedisIdempotencyStore, type IdempotencyStore } from '../../lib/index.js';
import { PostgresIdempotencyStore } from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import type { EffectResult, HeldRun, RecordedEvent } from '../fixtures/idempotency-worker.js';
import { startApp, type TestApp } from '../support/app.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { spawnFixture, type Fixture } from '../support/fixtures.js';
import { Leftovers } from '../support/leftovers.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { bullOptions, lastEventId, redisClient, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

interface EffectRow {
  id: string;
  key: string;
  job_id: string;
  worker: string;
  takeover: boolean;
}

/**
 * Resolves once `total` jobs of the queue have finished (QueueEvents `completed`/`failed`, confirmed by the job
 * counts), with the counts; rejects with the counts after `timeoutMs`. Listen before the jobs are added.
 */
function drained(
  queue: Queue,
  events: QueueEvents,
  total: number,
  timeoutMs: number,
): Promise<{ completed: number; failed: number }> {
  return new Promise((resolve, reject) => {
    const finished = new Set<string>();
    let checking = false;
    const stop = () => {
      clearTimeout(timer);
      events.off('completed', onFinished);
      events.off('failed', onFinished);
    };
    const check = async () => {
      if (checking) return;
      checking = true;
      try {
        const counts = await queue.getJobCounts('completed', 'failed');
        if (counts.completed + counts.failed >= total) {
          stop();
          resolve({ completed: counts.completed, failed: counts.failed });
        }
      } finally {
        checking = false;
      }
    };
    const onFinished = ({ jobId }: { jobId: string }) => {
      finished.add(jobId);
      if (finished.size >= total) void check().catch(reject);
    };
    const timer = setTimeout(() => {
      events.off('completed', onFinished);
      events.off('failed', onFinished);
      void queue
        .getJobCounts('completed', 'failed', 'active', 'wait', 'delayed')
        .then((counts) => reject(new Error(`not drained after ${timeoutMs} ms: ${JSON.stringify(counts)}`)), reject);
    }, timeoutMs);
    events.on('completed', onFinished);
    events.on('failed', onFinished);
  });
}

/** Delivery order: groups of `group` keys, each group's keys interleaved `repeats` times (k0 k1 … k9 k0 k1 … k9 …). */
function deliveries(keys: string[], repeats: number, group: number): string[] {
  const order: string[] = [];
  for (let start = 0; start < keys.length; start += group) {
    const slice = keys.slice(start, start + group);
    for (let round = 0; round < repeats; round++) order.push(...slice);
  }
  return order;
}

describe('@IdempotencyKey across worker processes (real Redis, real PostgreSQL)', () => {
  const redis = redisClient();
  const pool = pgPool(4);
  const idemTable = uniqueTable('idem_eo');
  const pgStore = new PostgresIdempotencyStore({ pool, table: idemTable });
  const leftovers = new Leftovers(redis, pool);
  const { queues, queueEvents, namespaces, tables, fixtures } = leftovers;
  let app: TestApp | undefined;

  const spawnWorker = (env: Record<string, string>): Fixture => {
    const fixture = spawnFixture('idempotency-worker', env);
    fixtures.push(fixture);
    return fixture;
  };
  const openQueue = async (name: string): Promise<{ queue: Queue; events: QueueEvents }> => {
    const queue = new Queue(name, bullOptions());
    const events = new QueueEvents(name, { ...bullOptions(), lastEventId: await lastEventId(queue) });
    queues.push(queue);
    queueEvents.push(events);
    await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
    return { queue, events };
  };
  const effectsTable = async (): Promise<string> => {
    const table = uniqueTable('effects');
    tables.push(table);
    // No unique constraint on key: a second effect of one key is a second row.
    await pool.query(
      `CREATE TABLE ${table} (id bigserial PRIMARY KEY, key text NOT NULL, job_id text NOT NULL,
        worker text NOT NULL, takeover boolean NOT NULL)`,
    );
    return table;
  };
  const recordedEvents = async (probe: string): Promise<RecordedEvent[]> =>
    (await redis.lrange(`${probe}:events`, 0, -1)).map((line) => JSON.parse(line) as RecordedEvent);

  beforeAll(async () => {
    await pgStore.migrate();
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
    await leftovers.cleanUp();
  });

  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${idemTable}`);
    await pool.end();
    await redis.quit();
  });

  it.each([
    ['the Redis store (plain mode)', 'redis', false],
    ['the PostgreSQL store (transactional mode)', 'postgres', true],
  ] as const)(
    '4 processes × concurrency 4, 1,200 deliveries of 150 keys, %s: one effect per key, every job completes, replays return the first result',
    async (_title, storeKind, transactional) => {
      const queueName = uniqueName('idem-eo');
      const prefix = uniqueName('ujeo');
      const probe = uniqueName('probe-eo');
      namespaces.push(prefix, probe);
      const table = await effectsTable();
      const { queue, events } = await openQueue(queueName);
      const keyCount = 150;
      const repeats = 8;
      const keys = Array.from({ length: keyCount }, (_, i) => `evt_${String(i).padStart(3, '0')}`);
      const order = deliveries(keys, repeats, 10);
      expect(order).toHaveLength(1200);

      const workers = Array.from({ length: 4 }, (_, i) =>
        spawnWorker({
          QUEUE: queueName,
          PREFIX: prefix,
          PROBE: probe,
          LABEL: `w${i}`,
          MODE: 'effect',
          STORE: storeKind,
          TRANSACTIONAL: transactional ? '1' : '0',
          IDEM_TABLE: idemTable,
          EFFECTS_TABLE: table,
          CONCURRENCY: '4',
          LEASE: '1000',
          WORK_MS: '30',
        }),
      );
      await Promise.all(workers.map((worker) => worker.waitFor((m) => m.ready === true)));

      const done = drained(queue, events, order.length, 35_000);
      const added: string[] = [];
      for (let i = 0; i < order.length; i += 300) {
        const bulk = await queue.addBulk(order.slice(i, i + 300).map((key) => ({ name: 'effect', data: { key } })));
        added.push(...bulk.map((job) => job.id!));
      }
      expect(new Set(added).size).toBe(order.length);
      expect(await done).toEqual({ completed: order.length, failed: 0 });

      // Exactly one effect per distinct key.
      const { rows } = await pool.query<EffectRow>(`SELECT id::text, key, job_id, worker, takeover FROM ${table}`);
      expect(rows).toHaveLength(keyCount);
      expect(rows.map((row) => row.key).sort()).toEqual(keys);
      expect(rows.filter((row) => row.takeover)).toEqual([]);
      // the effects were spread over the processes
      expect(new Set(rows.map((row) => row.worker)).size).toBeGreaterThanOrEqual(2);
      const rowOf = new Map(rows.map((row) => [row.key, row]));

      // Each key's record is completed and stores the result of the run that made the effect.
      const store: IdempotencyStore =
        storeKind === 'redis' ? new RedisIdempotencyStore({ client: redis, prefix }) : pgStore;
      const stored = new Map<string, EffectResult>();
      for (const key of keys) {
        const record = await store.get(`${queueName}:effect`, key);
        expect(record).toMatchObject({ state: 'completed', attempts: 1 });
        const result = JSON.parse(record!.result!) as EffectResult;
        const row = rowOf.get(key)!;
        expect(result).toEqual({ key, effectId: row.id, jobId: row.job_id, worker: row.worker, takeover: false });
        stored.set(key, result);
      }

      // Every job returned its key's stored result: the one run that made the effect, and every replay.
      const completed = await queue.getJobs(['completed'], 0, -1);
      expect(completed).toHaveLength(order.length);
      let replays = 0;
      for (const job of completed) {
        const { key } = job.data as { key: string };
        expect(job.returnvalue).toEqual(stored.get(key));
        if ((job.returnvalue as EffectResult).jobId !== job.id) replays++;
      }
      expect(replays).toBe(order.length - keyCount);

      // The library's own account, from every process: one claim and one completion per key, a replay per
      // duplicate, and duplicates that met a running claim were delayed (the race was real), never run.
      const recorded = await waitFor('every event recorded', async () => {
        const all = await recordedEvents(probe);
        const finals = all.filter((e) => e.type === 'idempotencyCompleted' || e.type === 'idempotencyReplayed');
        return finals.length >= order.length && all;
      });
      const count = (type: string) => recorded.filter((event) => event.type === type).length;
      expect(count('idempotencyClaimed')).toBe(keyCount);
      expect(count('idempotencyCompleted')).toBe(keyCount);
      expect(count('idempotencyReplayed')).toBe(order.length - keyCount);
      expect(count('idempotencyInProgress')).toBeGreaterThan(0);
      expect(recorded.filter((event) => event.type === 'idempotencyInProgress' && event.action !== 'delayed')).toEqual(
        [],
      );
      expect(
        recorded.filter((event) =>
          ['idempotencyLeaseLost', 'idempotencyReleased', 'idempotencyMismatch', 'error'].includes(event.type),
        ),
      ).toEqual([]);
      expect(recorded.filter((event) => event.type === 'idempotencyClaimed' && event.takeover !== false)).toEqual([]);
    },
    60_000,
  );

  it('a worker process SIGKILLed mid-handler: its claim rolls back with its transaction, another process claims the key and commits exactly one effect (transactional)', async () => {
    const queueName = uniqueName('idem-to');
    const prefix = uniqueName('ujto');
    const probe = uniqueName('probe-to');
    namespaces.push(prefix, probe);
    const table = await effectsTable();
    const { queue, events } = await openQueue(queueName);
    const workerEnv = {
      QUEUE: queueName,
      PREFIX: prefix,
      PROBE: probe,
      MODE: 'effect',
      STORE: 'postgres',
      TRANSACTIONAL: '1',
      IDEM_TABLE: idemTable,
      EFFECTS_TABLE: table,
      CONCURRENCY: '1',
      LEASE: '1000',
      // BullMQ's stall detection tightened, so the job of a killed process comes back in about a second: A's job
      // lock lasts 1 s; B checks for stalled jobs every 300 ms but holds its own lock longer, so that an event-loop
      // stall of a loaded machine never makes B's run look stalled too.
      LOCK_DURATION: '1000',
      STALLED_INTERVAL: '300',
    };
    const scope = `${queueName}:effect`;

    // Worker A claims key K, writes its effect through the transaction and stops at the hold point.
    const a = spawnWorker({ ...workerEnv, LABEL: 'A', HOLD: 'hang' });
    await a.waitFor((m) => m.ready === true);
    const job = await queue.add('effect', { key: 'K' });
    const held = (await a.waitFor((m) => 'held' in m)).held as HeldRun;
    expect(held).toEqual({ worker: 'A', jobId: job.id, key: 'K', takeover: false });
    // The effect is written but not committed, and so is A's claim: no record is visible, yet the key is held (a
    // claim of it is told the key is in progress, by a holder it cannot name, and that the holder still holds it).
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows).toEqual([{ n: 0 }]);
    expect(await pgStore.get(scope, 'K')).toBeUndefined();
    const probeClaim = { scope, key: 'K', owner: 'probe', leaseMs: 1000, fingerprint: undefined, jobId: 'probe' };
    const lost = await pgStore.claim(probeClaim);
    expect(lost).toMatchObject({ claimed: false, record: { state: 'in_progress', owner: undefined } });
    expect(lost.claimed === false && (await lost.stillHeld?.())).toBe(true);

    // Worker B is up; A is SIGKILLed mid-handler.
    const b = spawnWorker({ ...workerEnv, LABEL: 'B', LOCK_DURATION: '10000' });
    await b.waitFor((m) => m.ready === true);
    a.child.kill('SIGKILL');
    expect(await a.exited).toMatchObject({ signal: 'SIGKILL' });

    // BullMQ recovers the stalled job in B. A's claim rolled back with its transaction when its connection died, so B
    // claims the key afresh; BullMQ counted the stall, which B's handler is told as a takeover. B completes.
    const result = (await job.waitUntilFinished(events, 30_000)) as EffectResult;
    expect(result).toMatchObject({ key: 'K', jobId: job.id, worker: 'B', takeover: true });

    // Exactly one effect committed: B's. A's write was rolled back with its transaction.
    const { rows } = await pool.query<EffectRow>(`SELECT id::text, key, job_id, worker, takeover FROM ${table}`);
    expect(rows).toEqual([{ id: result.effectId, key: 'K', job_id: job.id, worker: 'B', takeover: true }]);
    const record = await pgStore.get(scope, 'K');
    expect(record).toMatchObject({ state: 'completed', attempts: 1, jobId: job.id });
    expect(JSON.parse(record!.result!)).toEqual(result);
    expect((await queue.getJob(job.id!))?.stalledCounter).toBe(1);

    // What the processes reported: A claimed; B took over (after waiting for A's transaction when it came back early).
    const recorded = await waitFor('B reported its completion', async () => {
      const all = await recordedEvents(probe);
      return all.some((e) => e.type === 'idempotencyCompleted') && all;
    });
    const claims = recorded.filter((event) => event.type === 'idempotencyClaimed');
    expect(claims.map(({ worker, jobId, takeover }) => ({ worker, jobId, takeover }))).toEqual([
      { worker: 'A', jobId: job.id, takeover: false },
      { worker: 'B', jobId: job.id, takeover: true },
    ]);
    expect(recorded.filter((event) => event.type === 'idempotencyCompleted').map((event) => event.worker)).toEqual([
      'B',
    ]);
    // before its claim, B could only have waited for A's transaction to end
    const bEvents = recorded.filter((event) => event.worker === 'B').map((event) => event.type);
    const beforeClaim = bEvents.slice(0, bEvents.indexOf('idempotencyClaimed'));
    expect(beforeClaim.filter((type) => type !== 'idempotencyInProgress')).toEqual([]);

    // The key is settled: a new delivery replays B's result without running.
    const again = await queue.add('effect', { key: 'K' });
    expect(await again.waitUntilFinished(events, 30_000)).toEqual(result);
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows).toEqual([{ n: 1 }]);
  }, 60_000);

  // Regression: the lease keeper used to be stopped only after the completion returned, so a renewal in flight found
  // the record completed and was reported as a lost lease. Renewing now stops before the claim is settled.
  it('a renewal that reaches the store after the run completed its own record is not reported as a lost lease', async () => {
    const prefix = uniqueName('ujll');
    const inner = new RedisIdempotencyStore({ client: redis, prefix });
    let completed = false;
    const renewalAfterCompletion = deferred<boolean>();
    // The Redis store, with a completion that is slow to return (a slow network, or a database commit under load):
    // it returns once a renewal sent after it has been answered, or after one lease (three renewal periods), when no
    // renewal comes: none should be sent once the run is settling.
    const slowCompletion: IdempotencyStore = {
      name: 'redis-slow-completion',
      claim: (request) => inner.claim(request),
      renew: async (ref, leaseMs) => {
        const sentAfterCompletion = completed;
        const renewed = await inner.renew(ref, leaseMs);
        if (sentAfterCompletion) renewalAfterCompletion.resolve(renewed);
        return renewed;
      },
      complete: async (ref, completion) => {
        const done = await inner.complete(ref, completion);
        completed = true;
        await Promise.race([renewalAfterCompletion.promise, sleep(300)]);
        return done;
      },
      fail: (ref, failure) => inner.fail(ref, failure),
      release: (ref) => inner.release(ref),
      get: (scope, key) => inner.get(scope, key),
      delete: (scope, key) => inner.delete(scope, key),
    };
    app = await startApp({
      queue: uniqueName('idem-ll'),
      module: { prefix, idempotency: { stores: { slow: slowCompletion } } },
      idempotency: { key: (job) => (job.data as { key: string }).key, store: 'slow', lease: 300 },
      handler: async () => 'done',
    });
    const log = new EventLog(app);
    const job = await app.queue.add('effect', { key: 'K' });
    expect(await app.finished(job)).toBe('done');
    expect(await inner.get(`${app.queue.name}:effect`, 'K')).toMatchObject({ state: 'completed', attempts: 1 });
    expect(log.of('idempotencyCompleted')).toHaveLength(1);
    expect(log.of('idempotencyLeaseLost')).toEqual([]);
  });
});
