// Hostile review (session 34) of today's step-job work (commits 13388d2..abffc6d). Each case here failed before its fix,
// or says in its comment why it is kept as a control.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { DelayedError, Queue, UnrecoverableError, WaitingChildrenError, Worker, type Job } from 'bullmq';
import { RedisIdempotencyStore, UniqueJobsReaper, type IdempotencyStore } from '../../lib/index.js';
import { byKey, stepStore, type StepStore, type Steps } from '../support/step-stores.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import {
  byId,
  digestOf,
  owners,
  runningKey,
  runtimeOwner,
  waitForAttemptEnd,
  waitForParked,
} from '../support/locks.js';
import { EventLog } from '../support/events.js';
import { Outcomes } from '../support/outcomes.js';
import { bullOptions, redisClient, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { closingSignal, putBack } from '../../lib/worker/worker-closing.js';
import { workerOf } from '../conflicts/helpers.js';

// Transactional mode: a later step (its claim resumed a handover) that fails and is retried. Commit 2843be2 hands the
// claim over for the backoff in plain mode only (runThenComplete); the transactional path released it as any retried
// failure (afterFailure), so a duplicate delivered during the backoff claimed the key and ran step 1 a second time.
describe.each(['sqlite', 'postgres'] as const)(
  'session 34: transactional step job, later step retried (%s)',
  (kind) => {
    const { start } = useApps(`s34-tx-retry-${kind}`);
    let sql: StepStore;
    let store: IdempotencyStore;

    beforeAll(async () => {
      sql = await stepStore(kind);
      store = sql.store;
    });
    afterAll(async () => sql.close());

    it('a duplicate delivered while step 2 waits for its retry does not run step 1 again', async () => {
      const ran: string[] = [];
      const app = await start({
        module: { idempotency: { stores: { sql: store } } },
        idempotency: { key: byKey, store: 'sql', transactional: true },
        worker: { concurrency: 2 },
        handler: async (job: Job) => {
          const data = job.data as Steps;
          if ((data.step ?? 1) === 1) {
            ran.push(`step1:${job.id}`);
            await sql.write(job, `step1:${job.id}`);
            await job.updateData({ ...data, step: 2 });
            await job.moveToDelayed(Date.now(), job.token);
            throw new DelayedError();
          }
          ran.push(`step2:${job.id}`);
          if (job.attemptsMade === 0) throw new Error('step 2 fails once');
          return 'done';
        },
      });
      const events = new EventLog(app);
      const outcomes = new Outcomes(workerOf(app));
      // Its retry waits a minute: the duplicate comes meanwhile.
      const first = await app.queue.add('charge', { key: 'retried' }, { attempts: 2, backoff: 60_000 });
      await outcomes.failures(first.id!);
      const duplicate = await app.queue.add('charge', { key: 'retried' });
      const seen = await Promise.race([
        events.next((e) => e.type === 'idempotencyInProgress' && e.jobId === duplicate.id),
        events.next((e) => e.type === 'idempotencyClaimed' && e.jobId === duplicate.id),
      ]);
      expect(seen.type).toBe('idempotencyInProgress');
      expect(ran).toEqual([`step1:${first.id}`, `step2:${first.id}`]);
      await (await app.queue.getJob(first.id!))!.promote();
      expect(await outcomes.completed(first.id!)).toBe('done');
      await (await app.queue.getJob(duplicate.id!))?.promote().catch(() => undefined);
      expect(await outcomes.completed(duplicate.id!)).toBe('done');
      expect(ran).toEqual([`step1:${first.id}`, `step2:${first.id}`, `step2:${first.id}`]);
    }, 30_000);

    // The same, the backoff longer than what was left of the parked lease: the claim must outlive the backoff (else a
    // duplicate delivered after the lease and before the retry takes it over and runs step 1). PostgreSQL claims inside
    // the transaction: its rollback put back the handover it resumed, with that handover's own lease (delay 0 + lease).
    it('the claim of a resumed step whose retry waits longer than a lease stays the job’s for the whole backoff', async () => {
      const app = await start({
        module: { idempotency: { stores: { sql: store } } },
        idempotency: { key: byKey, store: 'sql', transactional: true, lease: 5_000 },
        handler: async (job: Job) => {
          const data = job.data as Steps;
          if ((data.step ?? 1) === 1) {
            await job.updateData({ ...data, step: 2 });
            await job.moveToDelayed(Date.now(), job.token);
            throw new DelayedError();
          }
          throw new Error('step 2 fails');
        },
      });
      const outcomes = new Outcomes(workerOf(app));
      const first = await app.queue.add('charge', { key: 'long' }, { attempts: 2, backoff: 60_000 });
      await outcomes.failures(first.id!);
      const failedAt = Date.now();
      const record = await store.get(`${app.queue.name}:charge`, 'long');
      expect(record?.state).toBe('in_progress');
      expect(record!.expiresAt).toBeGreaterThanOrEqual(failedAt + 60_000 - 1_000);
    }, 30_000);

    // A resumed later step that fails for good releases the key (onFailure 'release', the default) or keeps the
    // failure. PostgreSQL claims inside the transaction: its rollback put the handover back, and the release (a claim
    // that rolled back: nothing to delete) or the kept failure (refused by the live handover) left it parked, for what
    // was left of its lease (a parent resumed after its children: the key's ttl): duplicates waited for it.
    it.each(['release', 'keep'] as const)(
      'a resumed step that fails for good leaves no parked record (onFailure %s)',
      async (onFailure) => {
        const key = `final-${onFailure}`;
        const app = await start({
          module: { idempotency: { stores: { sql: store } } },
          idempotency: { key: byKey, store: 'sql', transactional: true, lease: 60_000, onFailure },
          handler: async (job: Job) => {
            const data = job.data as Steps;
            if ((data.step ?? 1) === 1) {
              await job.updateData({ ...data, step: 2 });
              await job.moveToDelayed(Date.now(), job.token);
              throw new DelayedError();
            }
            throw new UnrecoverableError('step 2 fails for good');
          },
        });
        const first = await app.queue.add('charge', { key });
        await expect(app.finished(first)).rejects.toThrow('step 2 fails for good');
        const record = await store.get(`${app.queue.name}:charge`, key);
        if (onFailure === 'release') expect(record).toBeUndefined();
        else expect(record).toMatchObject({ state: 'failed' });
      },
      30_000,
    );
  },
);

// A run-time lock parked by a parent waiting for its children (a day: PARKED_FOR_CHILDREN_MS) whose child fails it
// (failParentOnFailure): no worker event names the parent, so nothing of the job's own run gives R back. The reaper
// frees it: a parked slot carries a mark of its own (PARKED_MARK), and its job is checked as an enqueue lock's is.
describe('session 34: parked run-time lock of a parent failed by its child (while_executing)', () => {
  const { redis, start } = useApps('s34-rt-parent');

  it('the reaper keeps the parked R of a live step job, and releases it once the job is removed', async () => {
    const app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: async (job: Job<{ id: string }>) => {
        await job.moveToDelayed(Date.now() + 60_000, job.token);
        throw new DelayedError();
      },
    });
    const job = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('parked') });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    await waitForParked(redis, running, runtimeOwner(app, job.id!));
    expect(await owners(redis, running)).toEqual([job.id]);
    const reaper = app.moduleRef.get(UniqueJobsReaper);
    // Whole passes: a run ends on its time budget when other clients' keys fill the shared Redis, and the next run
    // goes on from there (it would not come back to a key the pass already met).
    const wholePass = async () => {
      let reaped = 0;
      for (;;) {
        const report = await reaper.run();
        reaped += report.reaped.runtimeLeases;
        if (report.complete) return reaped;
      }
    };
    expect(await wholePass()).toBe(0);
    expect(await owners(redis, running)).toEqual([job.id]);
    await job.remove();
    expect(await wholePass()).toBe(1);
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);

  it('the parent failed by its child does not keep R for a day (the reaper frees it at the latest)', async () => {
    const ref: { app?: TestApp } = {};
    const app = (ref.app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      worker: { concurrency: 2 },
      handler: async (job: Job<{ id: string }>) => {
        if (job.name === 'child') throw new UnrecoverableError('child fails');
        const parent = { id: job.id!, queue: job.queueQualifiedName };
        await ref.app!.queue.add('child', { id: 'c' }, { parent, failParentOnFailure: true });
        if (await job.moveToWaitingChildren(job.token!)) throw new WaitingChildrenError();
        return 'parent done';
      },
    }));
    const parent = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('parent') });
    await expect(app.finished(parent)).rejects.toThrow();
    expect(await parent.getState()).toBe('failed');
    // The child may fail the parent before the parent's attempt ended and parked R: the reaper runs after that park.
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    await waitForAttemptEnd(redis, running, runtimeOwner(app, parent.id!));
    await app.moduleRef.get(UniqueJobsReaper).run();
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);
});

// A later step that fails and is retried parks its claim for the backoff BullMQ will apply, asked of BullMQ before it
// applies it (attemptEnd: Job#shouldRetryJob). A backoff with jitter is drawn again by BullMQ: the claim may end before
// the retry is due, and a duplicate delivered in between claims the key and runs step 1 again. Math.random is made to
// draw the smallest backoff for the library's question and the largest for BullMQ's.
describe('session 34: a retried later step with a jittered backoff (redis store)', () => {
  const { start, redis } = useApps('s34-jitter');

  it('the parked claim lasts until the retry BullMQ scheduled, whatever the jitter drew', async () => {
    const app = await start({
      idempotency: { key: byKey, lease: 5_000 },
      handler: async (job: Job) => {
        const data = job.data as Steps;
        if ((data.step ?? 1) === 1) {
          await job.updateData({ ...data, step: 2 });
          await job.moveToDelayed(Date.now(), job.token);
          throw new DelayedError();
        }
        // The library asks first (smallest backoff), then BullMQ draws its own (largest).
        jest.spyOn(Math, 'random').mockReturnValueOnce(0).mockReturnValueOnce(0.999);
        throw new Error('step 2 fails');
      },
    });
    const outcomes = new Outcomes(workerOf(app));
    const first = await app.queue.add(
      'charge',
      { key: 'jitter' },
      { attempts: 2, backoff: { type: 'fixed', delay: 60_000, jitter: 1 } },
    );
    try {
      await outcomes.failures(first.id!);
    } finally {
      jest.restoreAllMocks();
    }
    const failedAt = Date.now();
    const retryIn = (await app.queue.getJob(first.id!))!.delay;
    expect(retryIn).toBeGreaterThan(50_000); // BullMQ drew the largest
    const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
    const record = await store.get(`${app.queue.name}:charge`, 'jitter');
    expect(record?.state).toBe('in_progress');
    expect(record!.expiresAt).toBeGreaterThanOrEqual(failedAt + retryIn - 1_000);
  }, 30_000);
});

// A forced close's put-back made again on a connection of its own (moveElsewhere, commit abffc6d) builds a BullMQ
// Queue, whose constructor writes the queue's meta hash (`opts.maxLenEvents` from its own options: BullMQ's default
// 10,000, and the version) unless told `skipMetasUpdate`: it overwrote the events-stream length the application set.
describe('session 34: the put-back made elsewhere leaves the queue’s meta as it was', () => {
  it('keeps the application’s opts.maxLenEvents', async () => {
    const name = uniqueName('s34-meta');
    const queue = new Queue(name, { ...bullOptions(), streams: { events: { maxLen: 50 } } });
    const worker = new Worker(name, null, { ...bullOptions(), autorun: false });
    const client = redisClient();
    try {
      await queue.waitUntilReady();
      const metaKey = `${queue.qualifiedName}:meta`;
      await waitFor('the queue’s meta', async () => (await client.hget(metaKey, 'opts.maxLenEvents')) === '50');
      await queue.add('job', {});
      const token = 'tok-s34';
      const job = await worker.getNextJob(token);
      expect(job).toBeDefined();
      const signal = closingSignal(worker)!;
      // The move on the worker's own connection fails (as when a forced close closed it under the move).
      job.moveToDelayed = () => Promise.reject(new Error('Connection is closed.'));
      await expect(putBack(job, token, new Error('closing'), signal, () => undefined)).rejects.toThrow(DelayedError);
      expect(await queue.getJobState(job.id!)).toBe('delayed');
      expect(await client.hget(metaKey, 'opts.maxLenEvents')).toBe('50');
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      await client.quit();
    }
  }, 30_000);
});
