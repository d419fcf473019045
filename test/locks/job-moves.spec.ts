// A lock with lockTtl lives that long past its job's run time. changeDelay and promote move the run time, through a
// guarded queue: the lock follows (found by the hostile review of issue 16: the TTL stayed fixed at enqueue, so a
// duplicate was accepted while the first job still waited, and an until_expired period outlived a promoted run).
import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { byId, dedupKey, digestOf, enqueuedJob, expiringKey, queuedKey } from '../support/locks.js';

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
    const left = Number(await redis.zscore(key, job.id!)) - (await serverMs());
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
