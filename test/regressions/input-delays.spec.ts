// Delays BullMQ takes that are not whole milliseconds (a jitter: `delay: Math.random() * 5000`) or are past what Redis
// takes as an expiry: the enqueue lock's lease and TTL count the delay, and Redis refuses a fractional or huge expiry.
// Before, on the fast path with lockTtl every such add threw (BullMQ's SET … PX refused the TTL), and on the slot set
// the acquire threw after its ZADD (its PEXPIRE refused the lease): the add failed, but a slot stayed held by a job id
// that never got a job, and the next enqueue of the digest was answered as a duplicate of that ghost.
import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { byId, dedupKey, digestOf, enqueuedJob, owners, queuedKey } from '../support/locks.js';

describe('delays that are not whole milliseconds, or huge', () => {
  const { redis, start } = useApps('delays');

  it.each([[1500.5], [1e300]])(
    'fast path with lockTtl, delay %p: enqueued and held like any delayed job',
    async (delay) => {
      const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 60_000 }, paused: true });
      const job = await a.queue.add('sync', { id: 'd' }, { delay });
      expect(await job.getState()).toBe('delayed');
      const duplicate = await a.queue.add('sync', { id: 'd' }, { delay });
      expect(duplicate.id).toBe(job.id);
      // A guarded move to a fractional delay moves the lock's TTL the same way.
      await job.changeDelay(2500.5);
      await job.remove();
    },
  );

  it.each([
    ['lockLimit 2', { lockLimit: 2 }],
    ["uniqueAcross 'queues'", { uniqueAcross: 'queues' as const, lockLimit: 1 }],
  ])(
    'slot set (%s), delay 1500.5 and 1e300: enqueued and held; nothing held for an add BullMQ refused',
    async (_label, extra) => {
      const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, ...extra }, paused: true });
      const key = queuedKey(a.prefix, digestOf(a, 'sync', { id: 'd' }));
      // BullMQ refuses a delay of Infinity (its options cannot be serialized): the slot taken for it is given back.
      await expect(a.queue.add('sync', { id: 'd' }, { delay: Infinity })).rejects.toThrow();
      expect(await owners(redis, key)).toEqual([]);

      const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'd' }, { delay: 1500.5 }));
      expect(await job.getState()).toBe('delayed');
      expect(await owners(redis, key)).toEqual([job.id]);
      const far = await a.queue.add('sync', { id: 'd' }, { delay: 1e300 });
      const jobs = [job.id, far.id];
      if (extra.lockLimit === 2) {
        expect(far.id).not.toBe(job.id);
        expect(await far.getState()).toBe('delayed');
        expect(await owners(redis, key)).toEqual([...jobs].sort());
      } else {
        expect(far.id).toBe(job.id);
      }
      for (const id of new Set(jobs)) await a.queue.remove(id!);
      // A removed job gives its slot back, except on a lock across queues (another queue's job may hold it by that id).
      if (extra.lockLimit === 2) expect(await owners(redis, key)).toEqual([]);
    },
  );

  // A caller's `timestamp`: BullMQ runs a delayed job at that timestamp plus its delay. Before, the lock's TTL counted
  // the delay from now, so a timestamp in the future let a duplicate in long before the first job ran.
  it('a delayed job with a timestamp in the future: the lock lasts lockTtl past its run time', async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 1_000 }, paused: true });
    const job = await a.queue.add('sync', { id: 't' }, { timestamp: Date.now() + 60_000, delay: 500 });
    expect(await redis.pttl(dedupKey(a.queue.name, digestOf(a, 'sync', { id: 't' })))).toBeGreaterThan(60_000);
    const b = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, paused: true });
    const key = queuedKey(b.prefix, digestOf(b, 'sync', { id: 't' }));
    await b.queue.add('sync', { id: 't' }, { timestamp: Date.now() + 3_600_000, delay: 500 });
    const [, score] = await redis.zrange(key, '0', '-1', 'WITHSCORES');
    expect(Number(score) - Date.now()).toBeGreaterThan(24 * 3_600_000 + 3_500_000); // the 24 h lease past the run time
    await job.remove();
  });
});
