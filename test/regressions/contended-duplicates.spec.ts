/**
 * Duplicates of a digest this process has seen held are answered by a read of BullMQ's deduplication key, not by
 * BullMQ's whole add script (docs/performance.md). The answers must be the same as the add script's: the holder while
 * it holds the lock, a new job once it released it, and a new job when the holder's key is stale (its job deleted).
 */
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { useApps } from '../support/apps.js';
import { hold } from '../support/gates.js';
import { enqueuedJob } from '../support/locks.js';
import { scanKeys } from '../support/redis.js';
import type { TestApp } from '../support/app.js';
import { ContendedDigests } from '../../lib/locks/contended-digests.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';

/** BullMQ's `deduplicated` events of a queue: one per duplicate its add script answered. */
async function deduplicatedEvents(redis: Redis, app: TestApp): Promise<number> {
  const entries = await redis.xrange(`bull:${app.queue.name}:events`, '-', '+');
  return entries.filter(([, fields]) => fields[1] === 'deduplicated').length;
}

describe('duplicates of a contended digest', () => {
  const { start, redis } = useApps('contended', {
    unique: { lock: 'until_executed', lockArgs: (d: { id: string }) => d.id },
  });

  it('are answered with the holder, the second one without running the add script', async () => {
    const app = await start({ paused: true });
    const holder = enqueuedJob(await app.service.enqueue(app.queue, 'charge', { id: 'o1' }));
    for (let i = 0; i < 3; i++) {
      expect(await app.service.enqueue(app.queue, 'charge', { id: 'o1', n: i })).toMatchObject({
        status: 'duplicate',
        existingJobId: holder.id,
      });
    }
    // Only the first duplicate went through BullMQ's add script (which records a `deduplicated` event).
    expect(await deduplicatedEvents(redis, app)).toBe(1);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('answer a burst of concurrent duplicates through queue.add with the holder, and add nothing', async () => {
    const app = await start({ paused: true });
    const holder = enqueuedJob(await app.service.enqueue(app.queue, 'charge', { id: 'o5' }));
    await app.service.enqueue(app.queue, 'charge', { id: 'o5' }); // the digest is now known to be contended
    const burst = await Promise.all(Array.from({ length: 50 }, (_, n) => app.queue.add('charge', { id: 'o5', n })));
    expect(new Set(burst.map((job) => job.id))).toEqual(new Set([holder.id]));
    expect(burst.map((job) => (job.data as { n: number }).n)).toEqual(Array.from({ length: 50 }, (_, n) => n));
    expect(await deduplicatedEvents(redis, app)).toBe(1);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('answer the contended duplicates of one addBulk from one read, each with its holder, and add the new ones', async () => {
    const app = await start({ paused: true });
    const ids = ['b1', 'b2', 'b3', 'b4'];
    const holders = await app.queue.addBulk(ids.map((id) => ({ name: 'charge', data: { id } })));
    await app.queue.addBulk(ids.map((id) => ({ name: 'charge', data: { id } }))); // now known to be contended
    const reads: number[] = [];
    const run = RedisScripts.prototype.run;
    RedisScripts.prototype.run = function (this: RedisScripts, name, keys, args) {
      if (name === 'peekDeduplication') reads.push(keys.length);
      return run.call(this, name, keys, args);
    };
    let again: Job[];
    try {
      again = await app.queue.addBulk([...ids, 'b5', ...ids].map((id, n) => ({ name: 'charge', data: { id, n } })));
    } finally {
      RedisScripts.prototype.run = run;
    }
    expect(reads).toEqual([4]);
    const holderIds = holders.map((job) => job.id);
    expect(again.map((job) => job.id)).toEqual([...holderIds, again[4].id, ...holderIds]);
    expect(holderIds).not.toContain(again[4].id);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 5 });
  });

  it('enqueue a new job once the holder finished and released the lock', async () => {
    const gate = hold();
    const app = await start({ handler: () => gate.promise });
    const first = enqueuedJob(await app.service.enqueue(app.queue, 'charge', { id: 'o2' }));
    expect(await app.service.enqueue(app.queue, 'charge', { id: 'o2' })).toMatchObject({ status: 'duplicate' });
    gate.resolve();
    await app.finished(first);
    const again = await app.service.enqueue(app.queue, 'charge', { id: 'o2' });
    expect(again.status).toBe('enqueued');
    expect(enqueuedJob(again).id).not.toBe(first.id);
  });

  it('enqueue a new job when the holder was deleted behind BullMQ’s back (a stale key)', async () => {
    const app = await start({ paused: true });
    const first = enqueuedJob(await app.service.enqueue(app.queue, 'charge', { id: 'o3' }));
    expect(await app.service.enqueue(app.queue, 'charge', { id: 'o3' })).toMatchObject({ status: 'duplicate' });
    await redis.del(`bull:${app.queue.name}:${first.id}`);
    const healed = await app.service.enqueue(app.queue, 'charge', { id: 'o3' });
    expect(healed.status).toBe('enqueued');
    const dedupKeys = await scanKeys(redis, `bull:${app.queue.name}:de:*`);
    expect(await Promise.all(dedupKeys.map((key) => redis.get(key)))).toEqual([enqueuedJob(healed).id]);
  });

  it('still replace a holder that has not started', async () => {
    const app = await start({
      paused: true,
      unique: { lock: 'until_executed', lockArgs: (d: { id: string }) => d.id, onConflict: 'replace' },
    });
    const first = enqueuedJob(await app.service.enqueue(app.queue, 'charge', { id: 'o4', v: 1 }));
    const second = await app.service.enqueue(app.queue, 'charge', { id: 'o4', v: 2 });
    const third = await app.service.enqueue(app.queue, 'charge', { id: 'o4', v: 3 });
    expect(second).toMatchObject({ status: 'enqueued', replacedJobId: first.id });
    expect(third).toMatchObject({ status: 'enqueued', replacedJobId: enqueuedJob(second).id });
    const waiting = await app.queue.getWaiting();
    expect(waiting.map((job) => job.data as unknown)).toEqual([{ id: 'o4', v: 3 }]);
  });
});

describe('the set of contended digests', () => {
  it('stays within its bound, forgetting the key found contended longest ago, however often it is read', () => {
    const contended = new ContendedDigests(3);
    for (const key of ['a', 'b', 'c']) contended.add(key);
    for (let i = 0; i < 5; i++) expect(contended.has('a')).toBe(true); // read, not found again by an add
    contended.add('d');
    expect(['a', 'b', 'c', 'd'].map((key) => contended.has(key))).toEqual([false, true, true, true]);
    contended.add('b'); // found contended again: kept longest now
    contended.add('e');
    expect(['b', 'c', 'd', 'e'].map((key) => contended.has(key))).toEqual([true, false, true, true]);
    contended.delete('d');
    expect(contended.has('d')).toBe(false);
  });
});
