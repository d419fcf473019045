// The edges of waking a delivery that waits for a key in progress (lib/idempotency/waiting-duplicates.ts):
// - a holder that died wakes no one: the duplicate comes back when the holder's lease could have ended, takes the key
//   over and runs once (the holder is a worker process, test/fixtures/idempotency-worker.ts, SIGKILLed mid-run);
// - a duplicate that announces itself after the holder settled (no one left to promote it) promotes itself;
// - a duplicate of another queue sharing the scope is woken by the holder's settle too (its own process promotes it).
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { Queue, type Job } from 'bullmq';
import {
  idempotencyOf,
  RedisIdempotencyStore,
  type IdempotencyClaimResult,
  type IdempotencyJob,
  type IdempotencyStore,
  type UniqueJobEvent,
} from '../../lib/index.js';
import { startApp, type TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { killFixturesAndWait, spawnFixture } from '../support/fixtures.js';
import { Gates } from '../support/gates.js';
import { Leftovers } from '../support/leftovers.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { bullOptions, redisClient, uniqueName } from '../support/redis.js';

/** Long enough that a duplicate which waited for it would never finish within the test. */
const LONG_LEASE = 10 * 60_000;

type InProgress = Extract<UniqueJobEvent, { type: 'idempotencyInProgress' }>;

/** The first time `job` was moved to delayed because its key was in progress. */
const delayedEvent = (events: EventLog, job: Job | string) =>
  events.next(
    (event) => event.type === 'idempotencyInProgress' && event.jobId === (typeof job === 'string' ? job : job.id),
  ) as Promise<InProgress>;

describe('a waiting duplicate whose holder died', () => {
  const redis = redisClient();
  const pool = pgPool(2);
  const leftovers = new Leftovers(redis, pool);
  let app: TestApp | undefined;

  afterEach(async () => {
    await killFixturesAndWait(); // nothing of the holder's renews its record any more
    await app?.close();
    app = undefined;
    await leftovers.cleanUp();
  });

  afterAll(async () => {
    await pool.end();
    await redis.quit();
  });

  it('runs once, taking the key over, when the lease of the killed holder has ended (not before)', async () => {
    const LEASE = 2_000;
    const queueName = uniqueName('wake-dead');
    const prefix = uniqueName('wake-dead-ns');
    const probe = uniqueName('wake-dead-probe');
    const effects = uniqueTable('wake_effects');
    leftovers.namespaces.push(prefix, probe);
    leftovers.tables.push(effects);
    await pool.query(
      `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, key text NOT NULL, job_id text NOT NULL,
        worker text NOT NULL, takeover boolean NOT NULL)`,
    );
    // The holder: a worker process (one job at a time) whose run hangs after its effect, renewing its lease.
    const holderProcess = spawnFixture('idempotency-worker', {
      QUEUE: queueName,
      PREFIX: prefix,
      PROBE: probe,
      LABEL: 'holder',
      MODE: 'effect',
      STORE: 'redis',
      EFFECTS_TABLE: effects,
      CONCURRENCY: '1',
      LEASE: String(LEASE),
      HOLD: 'hang',
    });
    leftovers.fixtures.push(holderProcess);
    await holderProcess.waitFor((message) => message.ready === true);
    const producer = new Queue(queueName, bullOptions());
    leftovers.queues.push(producer);
    const holder = await producer.add('effect', { key: 'K' });
    await holderProcess.waitFor((message) => (message.held as { jobId?: string } | undefined)?.jobId === holder.id);

    // The duplicate's worker: this process, same queue, prefix and key (so the same scope).
    app = await startApp({
      queue: queueName,
      module: { prefix },
      idempotency: { key: (job: IdempotencyJob<{ key: string }>) => job.data.key, lease: LEASE },
      handler: async (job: Job) => ({ by: 'waiter', takeover: idempotencyOf(job).takeover, at: Date.now() }),
    });
    const events = new EventLog(app);
    const addedAt = Date.now();
    const waiting = await app.queue.add('effect', { key: 'K' });
    const first = await delayedEvent(events, waiting);
    expect(first.action).toBe('delayed');
    expect(first.holderJobId).toBe(holder.id);
    expect(first.retryInMs).toBeLessThanOrEqual(LEASE + 50);
    expect(await app.queue.getJobState(waiting.id!)).toBe('delayed');

    holderProcess.child.kill('SIGKILL');
    const { signal } = await holderProcess.exited;
    expect(signal).toBe('SIGKILL');

    const result = (await app.finished(waiting)) as { by: string; takeover: boolean; at: number };
    expect(result).toMatchObject({ by: 'waiter', takeover: true });
    // It ran only when the lease it met could have ended (the record's expiry, as its claim saw it; a renewal before
    // the kill only pushes that later), and within a few leases of it.
    expect(result.at).toBeGreaterThanOrEqual(addedAt + first.retryInMs - 50);
    expect(result.at - addedAt).toBeLessThan(10 * LEASE);
    expect(app.runs.map((job) => job.id)).toEqual([waiting.id]);
    expect(events.of('idempotencyClaimed')).toEqual([expect.objectContaining({ jobId: waiting.id, takeover: true })]);
    expect(await app.queue.getJobState(waiting.id!)).toBe('completed');
    // The holder's effect (before it hung) and none of the waiter's: the waiter's handler writes nothing.
    expect((await pool.query(`SELECT job_id FROM ${effects}`)).rows).toEqual([{ job_id: holder.id }]);
  });
});

describe('a waiting duplicate woken by the holder settling', () => {
  const { start, redis } = useApps('wake-edge');

  interface Charge {
    orderId: string;
    tag: string;
  }
  const byOrder = (job: IdempotencyJob<Charge>) => job.data.orderId;

  it('promotes itself when it announces itself after the holder settled, and replays long before its delay', async () => {
    const prefix = uniqueName('wake-late-ns');
    const inner = new RedisIdempotencyStore({ client: redis, prefix });
    const waiterId = 'late-waiter';
    const metInProgress = deferred<IdempotencyClaimResult>();
    const proceed = deferred();
    let paused = false;
    // The Redis store, whose claim for the waiter, once it found the key in progress, returns only when the test says
    // so: by then the holder has completed the record, and its process forgot the key (no completeInOrder here, so the
    // holder's job completes only after its process settled the record). The waiter's announcement then reaches no
    // holder.
    const store: IdempotencyStore = {
      name: 'redis-late-announcement',
      claim: async (request) => {
        const claim = await inner.claim(request);
        if (request.jobId === waiterId && !paused && !claim.claimed && claim.record.state === 'in_progress') {
          paused = true;
          metInProgress.resolve(claim);
          await proceed.promise;
        }
        return claim;
      },
      renew: (ref, leaseMs) => inner.renew(ref, leaseMs),
      complete: (ref, completion) => inner.complete(ref, completion),
      fail: (ref, failure) => inner.fail(ref, failure),
      release: (ref) => inner.release(ref),
      get: (scope, key) => inner.get(scope, key),
      delete: (scope, key) => inner.delete(scope, key),
    };
    const gates = new Gates().hold('holder');
    let effects = 0;
    const app = await start({
      module: { prefix, idempotency: { stores: { late: store } } },
      idempotency: { key: byOrder, lease: LONG_LEASE, fingerprint: false, store: 'late' },
      worker: { concurrency: 4 },
      handler: async (job: Job) => {
        await gates.handler(job);
        effects++;
        return { effects, by: (job.data as Charge).tag };
      },
    });
    const events = new EventLog(app);
    const holder = await app.queue.add('charge', { orderId: 'o-late', tag: 'holder' });
    await gates.started('holder');
    const waiting = await app.queue.add('charge', { orderId: 'o-late', tag: 'waiter' }, { jobId: waiterId });
    await metInProgress.promise;

    gates.release('holder');
    await expect(app.finished(holder)).resolves.toEqual({ effects: 1, by: 'holder' });
    expect(await inner.get(`${app.queue.name}:charge`, 'o-late')).toMatchObject({ state: 'completed' });
    const announcedAt = Date.now();
    proceed.resolve();

    const delayed = await delayedEvent(events, waiting);
    expect(delayed.action).toBe('delayed');
    expect(delayed.retryInMs).toBeGreaterThan(LONG_LEASE / 2);
    await expect(app.finished(waiting)).resolves.toEqual({ effects: 1, by: 'holder' });
    const finished = (await app.queue.getJob(waiterId))!;
    expect(await finished.getState()).toBe('completed');
    expect(finished.finishedOn! - announcedAt).toBeLessThan(delayed.retryInMs / 10);
    expect(events.of('idempotencyReplayed')).toEqual([
      expect.objectContaining({ jobId: waiterId, state: 'completed' }),
    ]);
    expect(app.runs.map((job) => (job.data as Charge).tag)).toEqual(['holder']);
  });

  it('wakes a duplicate of another queue sharing the scope when the holder completes (its own process promotes it)', async () => {
    const gates = new Gates().hold('holder');
    const idempotency = { key: byOrder, lease: LONG_LEASE, fingerprint: false as const, scope: 'orders' };
    // Concurrency 1: while its job holds the key, the first queue's worker takes no other job.
    const first = await start({ idempotency, worker: { concurrency: 1 }, handler: gates.handler });
    const holder = await first.queue.add('charge', { orderId: 'o-shared', tag: 'holder' });
    await gates.started('holder');
    // Another queue (and another application, so another subscriber), same prefix and scope.
    const second = await start({ module: { prefix: first.prefix }, idempotency, handler: gates.handler });
    const events = new EventLog(second);
    const waiting = await second.queue.add('charge', { orderId: 'o-shared', tag: 'waiter' });
    const delayed = await delayedEvent(events, waiting);
    expect(delayed).toMatchObject({ action: 'delayed', holderJobId: holder.id });
    expect(await second.queue.getJobState(waiting.id!)).toBe('delayed');

    const releasedAt = Date.now();
    gates.release('holder');
    await expect(first.finished(holder)).resolves.toBe('ran:holder');
    await expect(second.finished(waiting)).resolves.toBe('ran:holder');
    const finished = (await second.queue.getJob(waiting.id!))!;
    expect(finished.finishedOn! - releasedAt).toBeLessThan(delayed.retryInMs / 10);
    expect(second.runs).toEqual([]);
    expect(events.of('idempotencyReplayed')).toEqual([
      expect.objectContaining({ jobId: waiting.id, state: 'completed' }),
    ]);
  });
});
