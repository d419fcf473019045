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
