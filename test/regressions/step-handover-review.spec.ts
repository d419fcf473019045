// Hostile review of the step-job handover (commit 13388d2): a step job under @IdempotencyKey (plain mode) hands its
// claim over to its next delivery instead of releasing it. Each case here failed before its fix.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { DelayedError, WaitingChildrenError, type Job } from 'bullmq';
import type pg from 'pg';
import {
  PostgresIdempotencyStore,
  RedisIdempotencyStore,
  SqliteIdempotencyStore,
  UniqueJobsReaper,
  type IdempotencyJob,
  type IdempotencyStore,
} from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { Outcomes } from '../support/outcomes.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { uniqueName } from '../support/redis.js';
import { workerOf } from '../conflicts/helpers.js';

interface Steps {
  key: string;
  step?: number;
  plain?: boolean;
}

const byKey = (job: IdempotencyJob<Steps>) => job.data.key;

describe('step handover: the reaper and a reused job id (redis store)', () => {
  const { start, redis } = useApps('step-review-reuse');

  it('releases the parked claim of a removed parent although a new job now has its custom id', async () => {
    const started: { app?: TestApp } = {};
    const app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      idempotency: { key: byKey },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        if ((job.data as Steps).plain) return 'plain';
        const parent = { id: job.id!, queue: job.queueQualifiedName };
        await started.app!.queue.add('child', { key: 'child', plain: true }, { delay: 60_000, parent });
        if (await job.moveToWaitingChildren(job.token!)) throw new WaitingChildrenError();
        return 'parent done';
      },
    });
    started.app = app;
    const events = new EventLog(app);
    const handedOver = events.next((event) => event.type === 'idempotencyHandedOver');
    const parent = await app.queue.add('charge', { key: 'k' }, { jobId: 'P' });
    await handedOver;
    const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
    const scope = `${app.queue.name}:charge`;
    expect((await store.get(scope, 'k'))?.owner).toMatch(/^step:/);

    // The parent is removed: its parked claim belongs to no job any more. A new job is given the same id (delayed: it
    // stays live, and runs no handler here).
    await parent.remove({ removeChildren: true });
    await app.queue.add('charge', { key: 'other', plain: true }, { jobId: 'P', delay: 60_000 });

    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    expect(report.reaped.idempotencyClaims).toBe(1);
    expect(await store.get(scope, 'k')).toBeUndefined();
  }, 30_000);
});

describe.each(['redis', 'postgres', 'sqlite'] as const)(
  'step handover: redelivered before the handover lands (%s)',
  (kind) => {
    const { start, redis } = useApps(`step-review-race-${kind}`);
    // The Redis store is made here (to be gated) on the app's prefix, which the app cleans up when it closes.
    const prefix = uniqueName('ujt');
    const table = uniqueTable('idem_step_review');
    let pool: pg.Pool | undefined;
    let backing: IdempotencyStore | undefined;
    let closeSql: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      if (kind === 'postgres') {
        pool = pgPool(2);
        const store = new PostgresIdempotencyStore({ pool, table });
        await store.migrate();
        backing = store;
        closeSql = async () => {
          await pool!.query(`DROP TABLE IF EXISTS ${table}`);
          await pool!.end();
        };
      } else if (kind === 'redis') {
        backing = new RedisIdempotencyStore({ client: redis, prefix });
      } else {
        const directory = mkdtempSync(join(tmpdir(), 'idem-step-review-'));
        const database = new Database(join(directory, 'store.db'), { timeout: 10_000 });
        const store = new SqliteIdempotencyStore({ database, table: 'idempotency_step_review' });
        await store.migrate();
        backing = store;
        closeSql = async () => {
          database.close();
          rmSync(directory, { recursive: true, force: true });
        };
      }
    });
    afterAll(async () => closeSql?.());

    it('the job delivered again while its step hands the claim over resumes it, not a mismatch', async () => {
      // The handler's move makes the job deliverable before the runner hands the claim over (one round trip later): a
      // second worker slot may claim first. The gate holds the handover until that claim was answered.
      const secondClaim = deferred();
      let claims = 0;
      const inner = backing!;
      const gated = new Proxy(inner, {
        get(target, property) {
          if (property === 'claim') {
            return async (...args: Parameters<IdempotencyStore['claim']>) => {
              const answer = await target.claim(...args);
              if (++claims === 2) secondClaim.resolve();
              return answer;
            };
          }
          if (property === 'handOver') {
            return async (...args: Parameters<NonNullable<IdempotencyStore['handOver']>>) => {
              await secondClaim.promise;
              return target.handOver!(...args);
            };
          }
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      const effects: string[] = [];
      const app = await start({
        module: { prefix, reaper: { interval: false }, idempotency: { stores: { sql: gated } } },
        idempotency: { key: byKey, store: 'sql' },
        worker: { concurrency: 2 },
        handler: async (job: Job) => {
          const data = job.data as Steps;
          if ((data.step ?? 1) === 1) {
            effects.push('step1');
            await job.updateData({ ...data, step: 2 });
            await job.moveToDelayed(Date.now(), job.token); // due at once
            throw new DelayedError();
          }
          effects.push('step2');
          return 'done';
        },
      });
      const outcomes = new Outcomes(workerOf(app));
      const job = await app.queue.add('charge', { key: 'race' });
      const failed = outcomes.failures(job.id!).then((errors) => errors[0]);
      expect(await Promise.race([outcomes.completed(job.id!), failed])).toBe('done');
      expect(effects).toEqual(['step1', 'step2']);
    }, 30_000);
  },
);

describe('step handover: a DelayedError thrown without moving the job (redis store)', () => {
  const { start } = useApps('step-review-unmoved');

  // BullMQ leaves such a job active and recovers it as stalled (a lock duration, then up to a `stalledInterval`: 30 s +
  // 30 s by default), but its claim was parked for a lease only (`job.delay` is 0): a duplicate delivered meanwhile took
  // the parked claim over once that lease ended and ran step 1 a second time.
  it('a duplicate does not run step 1 again while the job waits to be recovered as stalled', async () => {
    const effects: string[] = [];
    const app = await start({
      idempotency: { key: byKey, lease: 500 },
      // No stall recovery within the test: the job the handler did not move stays active.
      worker: { concurrency: 2, stalledInterval: 60_000 },
      handler: async (job: Job) => {
        const data = job.data as Steps;
        if ((data.step ?? 1) === 1) {
          effects.push(`step1:${job.id}`);
          await job.updateData({ ...data, step: 2 });
          throw new DelayedError(); // no moveToDelayed: BullMQ recovers the job as stalled
        }
        effects.push(`step2:${job.id}`);
        return 'done';
      },
    });
    const events = new EventLog(app);
    const handedOver = events.next((event) => event.type === 'idempotencyHandedOver');
    const first = await app.queue.add('charge', { key: 'unmoved' });
    const event = await handedOver;
    expect(event).toMatchObject({ jobId: first.id });
    // Parked until BullMQ may recover the job (lock duration + stall interval), not for the lease alone.
    expect((event as { leaseMs: number }).leaseMs).toBeGreaterThanOrEqual(30_000 + 60_000);

    const duplicate = await app.queue.add('charge', { key: 'unmoved' });
    const ofDuplicate = (type: string) => (e: { type: string; jobId?: string }) =>
      e.type === type && e.jobId === duplicate.id;
    // The duplicate looks, waits (the lease at most), and looks again once a lease-long parking would have ended: it
    // must meet the parked claim again, not take it over.
    await events.next(ofDuplicate('idempotencyInProgress'));
    const inProgress = events.of('idempotencyInProgress').length;
    const second = await Promise.race([
      events.next(
        (e) => ofDuplicate('idempotencyInProgress')(e) && events.of('idempotencyInProgress').length > inProgress,
      ),
      events.next(ofDuplicate('idempotencyClaimed')),
    ]);
    expect(second.type).toBe('idempotencyInProgress');
    expect(effects).toEqual([`step1:${first.id}`]);
  }, 30_000);
});

describe('step handover: a later step fails and is retried (redis store)', () => {
  const { start } = useApps('step-review-retry');

  // The handover covered the moves between steps only: a later step that failed and was retried released the claim as
  // any retried failure does (attempt-failure.ts), while the job's next attempt resumes at that step, so a duplicate
  // delivered during the backoff claimed the key and ran the handler from step 1 (step 1 twice). A resumed step job's
  // retryable failure now hands the claim over as a step move does.
  it('a duplicate delivered while step 2 waits for its retry does not run step 1 again', async () => {
    const effects: string[] = [];
    const app = await start({
      idempotency: { key: byKey },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        const data = job.data as Steps;
        if ((data.step ?? 1) === 1) {
          effects.push(`step1:${job.id}`);
          await job.updateData({ ...data, step: 2 });
          await job.moveToDelayed(Date.now(), job.token);
          throw new DelayedError();
        }
        effects.push(`step2:${job.id}`);
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
    expect(effects).toEqual([`step1:${first.id}`, `step2:${first.id}`]);
  }, 30_000);
});
