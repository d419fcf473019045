// The dead set is bounded by bytes as well as by entries and age: many large rejections leave at most `maxBytes` of
// entry JSON (measured with HSTRLEN and MEMORY USAGE of the entries hash), the newest kept and the oldest evicted; the
// byte counter (`<prefix>:{dead}:bytes`) stays equal to the sum of the stored values through take, delete, retry, age
// trim and a missing counter, and goes with the last entry.
import { describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { asDuplicate } from '../support/locks.js';
import { scanKeys } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { clientSide } from './helpers.js';

type Data = { id: string; n: number; blob?: string };

const entriesKey = (app: TestApp) => `${app.prefix}:{dead}:entries`;
const counterKey = (app: TestApp) => `${app.prefix}:{dead}:bytes`;

/** The bytes the entries hash holds in values: the sum of HSTRLEN over its fields. */
async function heldBytes(redis: Redis, app: TestApp): Promise<number> {
  const fields = await redis.hkeys(entriesKey(app));
  const lengths = await Promise.all(fields.map((field) => redis.hstrlen(entriesKey(app), field)));
  return lengths.reduce((sum, n) => sum + n, 0);
}

/** Asserts the byte counter equals what the hash holds (both 0 / absent when empty). */
async function expectCounterRight(redis: Redis, app: TestApp, step: string): Promise<number> {
  const held = await heldBytes(redis, app);
  const counter = await redis.get(counterKey(app));
  expect([step, counter === null ? 0 : Number(counter)]).toEqual([step, held]);
  expect(await app.service.deadSet.bytes()).toBe(held);
  return held;
}

describe('dead set bounded by bytes (client-side reject, until_executed)', () => {
  const { redis, start } = useApps('deadb', clientSide('reject'));

  it('keeps at most maxBytes after many large rejections: newest kept, oldest evicted', async () => {
    const maxBytes = 256 * 1024;
    const app = await start({ module: { deadSet: { maxBytes, maxEntryBytes: 100_000 } } });
    await app.queue.add('job', { id: 'a', n: 0 } satisfies Data);
    const blob = 'x'.repeat(60_000);
    const ids: string[] = [];
    for (let n = 1; n <= 30; n++) {
      const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n, blob } satisfies Data));
      ids.push(dup.deadSetEntryId!);
      expect(await heldBytes(redis, app)).toBeLessThanOrEqual(maxBytes);
    }

    const held = await expectCounterRight(redis, app, 'after 30 rejections');
    const entryBytes = await redis.hstrlen(entriesKey(app), ids[29]);
    expect(entryBytes).toBeGreaterThan(60_000);
    expect(held).toBeLessThanOrEqual(maxBytes);
    expect(held).toBeGreaterThan(maxBytes - entryBytes - 100); // evicted only what it had to
    // What Redis allocates for the hash: the values plus a small overhead.
    const memory = (await redis.memory('USAGE', entriesKey(app))) as number;
    expect(memory).toBeLessThanOrEqual(maxBytes * 1.25 + 16_384); // the allocator rounds each value up to its size class

    const listed = await app.service.deadSet.list({ limit: 100 });
    expect(listed.length).toBe(Math.floor(held / entryBytes));
    expect(listed.map((entry) => entry.id)).toEqual(ids.slice(-listed.length).reverse());
    expect(listed.every((entry) => (entry.data as Data).blob === blob && !entry.truncated)).toBe(true);
    expect(await app.service.deadSet.get(ids[0])).toBeUndefined();
    expect(await app.service.deadSet.size()).toBe(listed.length);
    expect(await redis.hlen(entriesKey(app))).toBe(listed.length);
    expect(await redis.pttl(counterKey(app))).toBeGreaterThan(0); // expires with the set
  });

  it('counts maxSize and maxBytes together: whichever is tighter wins', async () => {
    const app = await start({ module: { deadSet: { maxSize: 3, maxBytes: 1_000_000 } } });
    await app.queue.add('job', { id: 'a', n: 0 } satisfies Data);
    for (let n = 1; n <= 6; n++) await app.service.enqueue(app.queue, 'job', { id: 'a', n, blob: 'y'.repeat(1000) });
    expect(await app.service.deadSet.size()).toBe(3);
    await expectCounterRight(redis, app, 'maxSize trim');
  });

  it('keeps the counter right through delete, retry, a missing counter and age trim; leaves no key', async () => {
    const app = await start({ module: { deadSet: { maxAge: 400 } } });
    await app.queue.add('job', { id: 'a', n: 0 } satisfies Data);
    const add = async (n: number, size: number) =>
      asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n, blob: 'z'.repeat(size) } satisfies Data))
        .deadSetEntryId!;
    const first = await add(1, 1000);
    const second = await add(2, 2000);
    const third = await add(3, 3000);
    const all = await expectCounterRight(redis, app, 'three added');
    expect(all).toBeGreaterThan(6000);

    expect(await app.service.deadSet.delete(second)).toBe(true);
    const afterDelete = await expectCounterRight(redis, app, 'delete');
    expect(afterDelete).toBeLessThan(all - 2000);
    expect(await app.service.deadSet.delete(second)).toBe(false);
    await expectCounterRight(redis, app, 'delete of a missing entry');

    // Retry while the lock is held: taken out, rejected again as a new entry.
    const retried = asDuplicate((await app.service.deadSet.retry(third))!);
    expect(await app.service.deadSet.get(third)).toBeUndefined();
    expect(retried.deadSetEntryId).not.toBe(third);
    await expectCounterRight(redis, app, 'retry');

    // A dead set written without a counter (an older version, or the key deleted): counted again at the next add.
    await redis.del(counterKey(app));
    await add(4, 500);
    await expectCounterRight(redis, app, 'recount');

    // Age: entries older than maxAge are dropped by the next add.
    let n = 5;
    await waitFor('the first entries to age out', async () => {
      await add(n++, 100);
      await expectCounterRight(redis, app, `age trim ${n}`);
      return (await redis.hexists(entriesKey(app), first)) === 0;
    });

    for (const id of await redis.hkeys(entriesKey(app))) {
      // `false` for an entry that passed maxAge meanwhile (gone, as the list says): dropped all the same.
      await app.service.deadSet.delete(id);
      expect(await redis.hexists(entriesKey(app), id)).toBe(0);
      await expectCounterRight(redis, app, `delete ${id}`);
    }
    expect(await scanKeys(redis, `${app.prefix}:{dead}:*`)).toEqual([]);
  });
});
