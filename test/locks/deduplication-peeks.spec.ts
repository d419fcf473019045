// Reads of BullMQ deduplication keys asked in one tick share one script call (lib/locks/deduplication-peeks.ts). What
// must hold, on a real Redis: every read gets the answer a read of its own key would (holder, free, stale), one call per
// queue per tick however many reads, and never an answer Redis gave before the read was asked.
import { once } from 'node:events';
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { DeduplicationPeeks } from '../../lib/locks/deduplication-peeks.js';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { bullPrefix, deleteNamespaces, redisClient, uniqueName } from '../support/redis.js';

/** The library's scripts on `client`, recording the keys of every call. */
function countedScripts(client: ReturnType<typeof redisClient>): { scripts: RedisScripts; calls: string[][] } {
  const scripts = new RedisScripts(client);
  const calls: string[][] = [];
  const run = scripts.run.bind(scripts);
  scripts.run = (name, keys, args) => {
    calls.push([...keys]);
    return run(name, keys, args);
  };
  return { scripts, calls };
}

describe('deduplication key reads gathered per tick', () => {
  const redis = redisClient();
  const queues: string[] = [];
  const queue = (): { dedup: (id: string) => string; jobPrefix: string } => {
    const name = uniqueName('ujpeek');
    queues.push(name);
    const jobPrefix = `${bullPrefix()}:${name}:`;
    return { dedup: (id) => `${jobPrefix}de:${id}`, jobPrefix };
  };

  afterAll(async () => {
    await deleteNamespaces(redis, { queues });
    await redis.quit();
  });

  it('answers every read of one tick from one call, each as a read of its own key would', async () => {
    const { dedup, jobPrefix } = queue();
    await redis.set(dedup('held'), 'j1');
    await redis.hset(`${jobPrefix}j1`, 'name', 'x');
    await redis.set(dedup('stale'), 'gone'); // no TTL and its job is gone: BullMQ's next add replaces it
    await redis.set(dedup('ttl'), 'gone-too', 'PX', 60_000); // with a TTL it holds until it expires
    const { scripts, calls } = countedScripts(redis);
    const peeks = new DeduplicationPeeks(scripts);
    const ids = ['held', 'stale', 'ttl', 'free', 'held', 'free', 'held'];
    const answers = await Promise.all(ids.map((id) => peeks.peek(dedup(id), jobPrefix)));
    expect(answers).toEqual(['j1', undefined, 'gone-too', undefined, 'j1', undefined, 'j1']);
    expect(calls).toEqual([[dedup('held'), dedup('stale'), dedup('ttl'), dedup('free')]]);
  });

  it('sends a read asked while the call of its key is in flight in a new call, which sees what Redis holds then', async () => {
    const { dedup, jobPrefix } = queue();
    await redis.set(dedup('k'), 'first', 'PX', 60_000);
    const { scripts, calls } = countedScripts(redis);
    const peeks = new DeduplicationPeeks(scripts);
    const before = peeks.peek(dedup('k'), jobPrefix);
    await new Promise<void>((resolve) => process.nextTick(resolve)); // after the flush the read scheduled: it left
    expect(calls).toHaveLength(1);
    // No I/O since the call left, so its answer is not in yet. On the scripts' own connection, so Redis runs this
    // after the first call and before the second.
    const changed = scripts.client.set(dedup('k'), 'second', 'PX', 60_000);
    const after = peeks.peek(dedup('k'), jobPrefix);
    await changed;
    expect([await before, await after]).toEqual(['first', 'second']);
    expect(calls).toHaveLength(2);
  });

  it('gathers the reads of the lock store, the enqueue path’s way in', async () => {
    const { dedup, jobPrefix } = queue();
    await redis.set(dedup('s'), 'js', 'PX', 60_000);
    const { scripts, calls } = countedScripts(redis);
    const store = new LockStore(scripts);
    const answers = await Promise.all([1, 2, 3].map(() => store.deduplication.peek(dedup('s'), jobPrefix)));
    expect(answers).toEqual(['js', 'js', 'js']);
    expect(calls).toEqual([[dedup('s')]]);
  });

  it('answers every other read when one key of the call cannot be read, by sending the keys again one a call', async () => {
    const { dedup, jobPrefix } = queue();
    await redis.set(dedup('good'), 'jg', 'PX', 60_000);
    await redis.hset(dedup('bad'), 'not', 'a string'); // GET answers WRONGTYPE: the whole script fails
    const { scripts, calls } = countedScripts(redis);
    const peeks = new DeduplicationPeeks(scripts);
    const [good, bad] = await Promise.allSettled([
      peeks.peek(dedup('good'), jobPrefix),
      peeks.peek(dedup('bad'), jobPrefix),
    ]);
    expect(good).toEqual({ status: 'fulfilled', value: 'jg' });
    expect(bad.status).toBe('rejected');
    expect(String((bad as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    expect(calls).toEqual([[dedup('good'), dedup('bad')], [dedup('good')], [dedup('bad')]]);
  });

  it('answers a read asked while a test fakes timers (process.nextTick included)', async () => {
    const { dedup, jobPrefix } = queue();
    await redis.set(dedup('f'), 'jf', 'PX', 60_000);
    const peeks = new DeduplicationPeeks(new RedisScripts(redis));
    jest.useFakeTimers();
    try {
      expect(await peeks.peek(dedup('f'), jobPrefix)).toBe('jf');
    } finally {
      jest.useRealTimers();
    }
  });

  it('sends the reads of each queue in a call of its own, and splits a burst into calls of at most 500 keys', async () => {
    const a = queue();
    const b = queue();
    const ids = Array.from({ length: 1_100 }, (_, i) => `d${i}`);
    for (let i = 0; i < ids.length; i += 100) {
      const batch = ids.slice(i, i + 100).filter((_, k) => k % 2 === 0);
      await Promise.all(batch.map((id) => redis.set(a.dedup(id), `job-${id}`, 'PX', 60_000)));
    }
    await redis.set(b.dedup('d0'), 'other-queue', 'PX', 60_000);
    const { scripts, calls } = countedScripts(redis);
    const peeks = new DeduplicationPeeks(scripts);
    const answers = await Promise.all([
      ...ids.map((id) => peeks.peek(a.dedup(id), a.jobPrefix)),
      peeks.peek(b.dedup('d0'), b.jobPrefix),
    ]);
    expect(answers).toEqual([...ids.map((id, i) => (i % 2 === 0 ? `job-${id}` : undefined)), 'other-queue']);
    expect(calls.map((keys) => keys.length)).toEqual([500, 500, 100, 1]);
  });

  it('rejects every read of a failed call with the error of its key, and sends the next reads again', async () => {
    const { dedup, jobPrefix } = queue();
    const client = redisClient({ lazyConnect: true, enableOfflineQueue: false });
    client.on('error', () => undefined); // the refused commands are what this test looks at
    try {
      const peeks = new DeduplicationPeeks(new RedisScripts(client));
      const failed = await Promise.allSettled([peeks.peek(dedup('x'), jobPrefix), peeks.peek(dedup('y'), jobPrefix)]);
      expect(failed.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
      for (const { reason } of failed as PromiseRejectedResult[]) expect(String(reason)).toMatch(/enableOfflineQueue/);
      // The first command started the lazy connection; reads sent once it is ready go through.
      if (client.status !== 'ready') await once(client, 'ready');
      await redis.set(dedup('x'), 'back', 'PX', 60_000);
      expect(await peeks.peek(dedup('x'), jobPrefix)).toBe('back');
    } finally {
      client.disconnect();
    }
  });
});
