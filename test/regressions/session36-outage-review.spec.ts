// Hostile review (session 36) of outages, crashes and clocks, as an operator who makes Redis misbehave. Each case failed
// before its fix.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { RedisIdempotencyStore, UniqueJobsReaper } from '../../lib/index.js';
import { startApp, type TestApp } from '../support/app.js';
import { byId, digestOf, enqueuedJob, owners, queuedKey, removeUnguarded } from '../support/locks.js';
import { bullPrefix, redisClient, uniqueName } from '../support/redis.js';
import { deferred } from '../support/deferred.js';
import { ownRedisForFile } from '../support/own-redis.js';

// ACL users are a server setting: this file gets a server of its own (its default user cleans up after the tests).
const server = await ownRedisForFile();

const HOUR = 3_600_000;

async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Runs `work` in a process whose wall clock (`Date.now`) reads `skewMs` off the true time. */
async function withSkewedClock<T>(skewMs: number, work: () => Promise<T>): Promise<T> {
  const now = Date.now;
  Date.now = () => now() + skewMs;
  try {
    return await work();
  } finally {
    Date.now = now;
  }
}

// The reaper took an in-progress claim's lease end (written with Redis' clock) for ended only once the reaper process's
// own clock had passed it: a reaper whose machine's clock ran behind by more than the record's remaining life (its lease
// plus ten minutes) never released an orphaned claim, which kept refusing deliveries of other payloads of its key as
// mismatches for those ten minutes. Leases are decided by Redis' clock (docs/reliability.md).
describe("session 36: the reaper judges a claim's lease by Redis' clock, not its process's", () => {
  let redis: Redis;
  let app: TestApp;
  beforeAll(async () => {
    redis = redisClient();
    app = await startApp({
      queue: uniqueName('s36-reap-clock'),
      paused: true,
      unique: { lock: 'until_executed', lockArgs: byId },
      module: { reaper: { interval: false, grace: 0 } },
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.quit();
  });

  it.each([
    ['behind', -HOUR],
    ['ahead', HOUR],
  ])(
    'a reaper whose clock runs an hour %s releases the orphaned claim whose lease ended, never a live one',
    async (_label, skewMs) => {
      const scope = uniqueName('scope');
      const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
      const live = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: `live-${skewMs}` }));
      const claim = (key: string, jobId: string, leaseMs: number) =>
        store.claim({
          scope,
          key,
          owner: `owner-${key}`,
          leaseMs,
          fingerprint: undefined,
          jobId,
          jobKey: `${bullPrefix()}:${app.queue.name}:${jobId}`,
        });
      await claim('orphan', 'removed-job', 1);
      await claim('running', live.id!, 1);
      await claim('leased', 'removed-job-2', 60_000);
      const recordKey = (key: string) => store.recordKey(scope, key);
      // The 1 ms lease ends by Redis' clock: wait for it (it has, once Redis' clock has moved past it).
      const until = Number(await redis.hget(recordKey('orphan'), 'until'));
      while ((await redisNow(redis)) <= until) await new Promise((resolve) => setImmediate(resolve));

      const report = await withSkewedClock(skewMs, () => app.moduleRef.get(UniqueJobsReaper).run());

      expect(report.items.filter((item) => item.kind === 'idempotencyClaim')).toEqual([
        { key: recordKey('orphan'), kind: 'idempotencyClaim', jobId: 'removed-job', reason: 'job gone' },
      ]);
      expect(await redis.exists(recordKey('orphan'))).toBe(0);
      expect(await redis.hget(recordKey('running'), 'state')).toBe('in_progress');
      expect(await redis.hget(recordKey('leased'), 'state')).toBe('in_progress');
      await redis.del(recordKey('running'), recordKey('leased'));
    },
  );
});

// A scheduled reaper run that found suspects waits out its grace (15 s by default) before confirming them, and the
// module's shutdown waited for that run: `app.close()` (SIGTERM) took up to the whole grace, whatever `shutdownTimeout`
// said, Redis up or down. The shutdown now cuts the grace short; that run releases nothing (the orphan is found again).
describe("session 36: a shutdown does not wait out the reaper's grace", () => {
  it('close() during a run waiting out a 60 s grace ends at once; the orphan is left for a later run', async () => {
    const redis = redisClient();
    const app = await startApp({
      queue: uniqueName('s36-reap-close'),
      paused: true,
      unique: { lock: 'until_executed', lockLimit: 2, lockArgs: byId },
      module: { reaper: { interval: false, grace: 60_000 } },
    });
    try {
      const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'orphan' }));
      await removeUnguarded(app.queue.name, job.id!);
      const key = queuedKey(app.prefix, digestOf(app, 'sync', { id: 'orphan' }));
      const run = app.moduleRef.get(UniqueJobsReaper).run();
      const closing = performance.now();
      await app.moduleRef.close();
      const closeMs = performance.now() - closing;
      const report = await run;
      expect(closeMs).toBeLessThan(20_000);
      expect(report.reaped.enqueueLocks).toBe(0);
      expect(report.interrupted).toBe(true);
      expect(await owners(redis, key)).toEqual([job.id]);
    } finally {
      await app.close();
      await redis.quit();
    }
  }, 90_000);
});

// The library's connection logging in as a user that may not run EVALSHA/EVAL (a managed service's restricted role):
// the bootstrap logged "The Redis user may not write the library's keys … grant it the ACL rule ~<prefix>:*" for a
// user granted every key; the one rule to add went unsaid. The error now names the refused command and its rule.
describe('session 36: a library user refused a command the library runs', () => {
  it('the bootstrap error names the command (EVALSHA/EVAL) and its ACL rule, not the keys', async () => {
    await server.admin.call('ACL', 'SETUSER', 'noeval', 'reset', 'on', '>pw', '~*', '&*', '+@all', '-evalsha', '-eval');
    const refused = deferred<string>();
    const error = (message: unknown) => {
      if (/Redis user may not/.test(String(message))) refused.resolve(String(message));
    };
    const app = await startApp({
      queue: uniqueName('s36-noeval'),
      paused: true,
      unique: { lock: 'until_executed', lockLimit: 2, lockArgs: byId },
      module: {
        logger: { log: () => undefined, warn: () => undefined, error },
        connection: { host: '127.0.0.1', port: server.port, username: 'noeval', password: 'pw' },
      },
    });
    try {
      const line = await refused.promise;
      expect(line).toMatch(/may not run the command (EVALSHA|EVAL), which the library needs/);
      expect(line).toMatch(/ACL rule "\+(evalsha|eval)"/);
      expect(line).not.toMatch(/may not write the library's keys/);
      await expect(app.queue.add('sync', { id: 'a' })).rejects.toThrow(/NOPERM/);
    } finally {
      await app.close();
      await server.admin.call('ACL', 'DELUSER', 'noeval');
    }
  });
});
