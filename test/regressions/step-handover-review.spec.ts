// Hostile review of the step-job handover (commit 13388d2): a step job under @IdempotencyKey (plain mode) hands its
// claim over to its next delivery instead of releasing it. Each case here failed before its fix.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DelayedError, WaitingChildrenError, type Job } from 'bullmq';
import { RedisIdempotencyStore, UniqueJobsReaper, type IdempotencyStore } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { Outcomes } from '../support/outcomes.js';
import { uniqueName } from '../support/redis.js';
import { byKey, stepStore, type StepStore, type Steps as StepsOf } from '../support/step-stores.js';
import { workerOf } from '../conflicts/helpers.js';

type Steps = StepsOf & { plain?: boolean };

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
    let sql: StepStore | undefined;
    let backing: IdempotencyStore | undefined;

    beforeAll(async () => {
      sql = kind === 'redis' ? undefined : await stepStore(kind);
      backing = sql?.store ?? new RedisIdempotencyStore({ client: redis, prefix });
    });
    afterAll(async () => sql?.close());

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
