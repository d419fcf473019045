// A lock with lockTtl lives that long past its job's run time. changeDelay and promote move the run time, through a
// guarded queue: the lock follows (found by the hostile review of issue 16: the TTL stayed fixed at enqueue, so a
// duplicate was accepted while the first job still waited, and an until_expired period outlived a promoted run).
import { describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { Gates } from '../support/gates.js';
import { byId, dedupKey, digestOf, enqueuedJob, expiringKey, queuedKey } from '../support/locks.js';
import { waitFor } from '../support/wait.js';

describe('moves of the run time through a guarded queue', () => {
  const { redis, start } = useApps('moves');
  /** The Redis server's clock (ms): leases are scored by it. */
  const serverMs = async () => {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };

  it('until_executed + lockTtl (fast path): changeDelay moves the TTL to lockTtl past the new run time', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 1000 }, paused: true });
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' }, { delay: 500 }));
    const key = dedupKey(app.queue.name, digestOf(app, 'sync', { id: 'u1' }));
    expect(await redis.pttl(key)).toBeLessThanOrEqual(1500);
    await (await app.queue.getJob(job.id!))!.changeDelay(60_000);
    expect(await redis.pttl(key)).toBeGreaterThan(59_000);
    expect(await redis.get(key)).toBe(job.id);
  });

  it('until_executed + lockTtl, lockLimit 2 (slot set): changeDelay moves the slot lease', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 1000, lockLimit: 2 },
      paused: true,
    });
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' }, { delay: 500 }));
    const key = queuedKey(app.prefix, digestOf(app, 'sync', { id: 'u1' }));
    await (await app.queue.getJob(job.id!))!.changeDelay(60_000);
    expect(Number(await redis.zscore(key, job.id!)) - (await serverMs())).toBeGreaterThan(59_000);
  });

  it('until_expired: promote makes the period end lockTtl after the promoted run, not after the original run time', async () => {
    const app = await start({ unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 5_000 }, paused: true });
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' }, { delay: 600_000 }));
    const key = expiringKey(app.prefix, digestOf(app, 'sync', { id: 'u1' }));
    await (await app.queue.getJob(job.id!))!.promote();
    // The score's fraction is the slot's mark (how-locks-move.md), not time: the lease ends at its whole ms.
    const left = Math.floor(Number(await redis.zscore(key, job.id!))) - (await serverMs());
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(5_000);
  });

  it('a job without lockTtl keeps a lock that lives as long as the job', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId }, paused: true });
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' }, { delay: 500 }));
    const key = dedupKey(app.queue.name, digestOf(app, 'sync', { id: 'u1' }));
    await (await app.queue.getJob(job.id!))!.changeDelay(60_000);
    expect(await redis.pttl(key)).toBe(-1);
    expect(await redis.get(key)).toBe(job.id);
  });
});

// Moves made in the worker: a retry's backoff, a handler's DelayedError, the reschedule strategy (found by the hostile
// review of session 24: the lock kept the TTL it had, expired while its job waited in delayed, and a duplicate got in).
describe('moves of the run time made in the worker', () => {
  const { redis, start } = useApps('wmoves');
  /** Waits until the lock outlives `lockTtl` by the move's delay (~60 s), then checks a duplicate is refused. */
  async function heldPastTheMove(app: TestApp, job: Job) {
    await waitFor('the job in delayed', async () => (await app.queue.getJobState(job.id!)) === 'delayed');
    const key = dedupKey(app.queue.name, digestOf(app, 'sync', { id: 'u1' }));
    await waitFor('the lock retimed', async () => (await redis.pttl(key)) > 50_000);
    expect(await redis.get(key)).toBe(job.id);
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', tag: 'dup' })).toMatchObject({
      status: 'duplicate',
      existingJobId: job.id,
    });
  }

  it.each(['until_executed', 'until_executing', 'until_and_while_executing'] as const)(
    '%s + lockTtl: a handler that moves its job to delayed (DelayedError) moves the lock with it',
    async (lock) => {
      const app = await start({
        unique: { lock, lockArgs: byId, lockTtl: 1_000 },
        handler: async (job: Job) => {
          await job.moveToDelayed(Date.now() + 60_000, job.token);
          throw new DelayedError();
        },
      });
      await heldPastTheMove(app, enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' })));
    },
  );

  it.each(['until_executed', 'until_executing'] as const)(
    '%s + lockTtl: a failed attempt waiting out its backoff keeps its lock past it',
    async (lock) => {
      const app = await start({
        unique: { lock, lockArgs: byId, lockTtl: 1_000 },
        handler: () => Promise.reject(new Error('boom')),
      });
      const backoff = { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } };
      await heldPastTheMove(app, enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' }, backoff)));
    },
  );

  it('until_and_while_executing + lockTtl: a job rescheduled behind the running one keeps its place in line', async () => {
    const gates = new Gates().hold('a');
    const app = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId, lockTtl: 1_000, rescheduleIn: 60_000 },
      worker: { concurrency: 2 },
      handler: gates.handler,
    });
    await app.service.enqueue(app.queue, 'sync', { id: 'u1', tag: 'a' });
    await gates.started('a');
    const b = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', tag: 'b' }));
    await heldPastTheMove(app, b);
    gates.releaseAll();
  });
});
