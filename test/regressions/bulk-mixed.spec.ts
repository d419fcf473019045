// One addBulk mixing every lock path (fast path, slot set, until_expired, unique across queues, plain; some producer
// jobIds) answers every entry as the same entries added one by one with queue.add do; and a bulk of 10,000
// general-path entries holds at most lockLimit jobs per digest.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import type { TestApp } from '../support/app.js';
import { byId, digestOf, owners, queuedKey } from '../support/locks.js';

const unique = [
  { jobName: 'fast', lock: 'until_executed' as const, lockArgs: byId },
  { jobName: 'slot', lock: 'until_executed' as const, lockArgs: byId, lockLimit: 2 },
  { jobName: 'exp', lock: 'until_expired' as const, lockArgs: byId, lockTtl: 60_000 },
  { jobName: 'across', lock: 'until_executed' as const, lockArgs: byId, uniqueAcross: 'queues' as const },
];

/** A seeded sequence of entries: names of every path (and a plain one), few ids, some producer jobIds. */
function entries(seed: number, count: number, tag: string) {
  let x = seed;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const names = ['fast', 'slot', 'exp', 'across', 'plain'];
  return Array.from({ length: count }, (_, n) => {
    const name = names[Math.floor(rnd() * names.length)];
    const id = `i${Math.floor(rnd() * 4)}`;
    const withJobId = name !== 'fast' && name !== 'plain' && rnd() < 0.25;
    return { name, data: { id, n }, ...(withJobId ? { opts: { jobId: `${tag}-p${n}` } } : {}) };
  });
}

/** Per entry: 'new' (its own job) or the entry index of the job it was answered with. */
async function outcome(app: TestApp, jobs: Job[]): Promise<(string | number)[]> {
  return Promise.all(
    jobs.map(async (job, n) => {
      const stored = await app.queue.getJob(job.id!);
      if (!stored) return `missing ${job.id}`;
      const m = (stored.data as { n: number }).n;
      return m === n ? 'new' : m;
    }),
  );
}

type Entry = { name: string; data: { id: string; n: number }; opts?: { jobId: string } };

describe('mixed and huge bulks', () => {
  const { redis, start } = useApps('bulkmixed', { unique, paused: true });

  it.each([1, 2, 3, 4, 5])('seed %i: addBulk answers every entry as sequential queue.add does', async (seed) => {
    const seq = await start();
    const bulk = await start();
    const list = entries(seed, 40, `s${seed}`);
    const one: Job[] = [];
    for (const e of list) one.push(await seq.queue.add(e.name, e.data, e.opts));
    const all = await bulk.queue.addBulk(list);
    const [a, b] = [await outcome(seq, one), await outcome(bulk, all)];
    // Ties among holders of one lockLimit-2 slot set may name either: compare new/duplicate, and the holder's id.
    const shape = (o: (string | number)[]) =>
      o.map((v) => (typeof v === 'number' ? `dup of ${(list[v].data as { id: string }).id}/${list[v].name}` : v));
    expect(shape(b)).toEqual(shape(a));
    for (const [n, v] of b.entries()) {
      if (typeof v === 'number') expect((list[v].data as { id: string }).id).toBe((list[n].data as { id: string }).id);
    }
    expect(await bulk.queue.count()).toBe(await seq.queue.count());
  });

  it('10,000 general-path entries (2,000 digests, lockLimit 2): 4,000 jobs, every slot held by a job', async () => {
    const app = await start();
    const list = Array.from({ length: 10_000 }, (_, n) => ({ name: 'slot', data: { id: `d${n % 2000}`, n } }));
    const jobs = await app.queue.addBulk(list);
    expect(jobs).toHaveLength(10_000);
    expect(await app.queue.count()).toBe(4000);
    expect(new Set(jobs.map((j) => j.id)).size).toBe(4000);
  }, 120_000);

  // Entries repeating a producer jobId of an earlier entry.
  async function both(list: Entry[]) {
    const seq = await start();
    const bulk = await start();
    const one: Job[] = [];
    for (const e of list) one.push(await seq.queue.add(e.name, e.data, e.opts));
    const all = await bulk.queue.addBulk(list);
    return { seq, bulk, one, all };
  }

  it('fast-path entry deduplicated by BullMQ, then a slot-set entry with the same jobId: the slot is still taken', async () => {
    const list: Entry[] = [
      { name: 'fast', data: { id: 'a', n: 0 } },
      { name: 'fast', data: { id: 'a', n: 1 }, opts: { jobId: 'X' } }, // a duplicate of entry 0: BullMQ adds no job X
      { name: 'slot', data: { id: 'b', n: 2 }, opts: { jobId: 'X' } }, // so this entry IS job X
    ];
    const { seq, bulk, one, all } = await both(list);
    expect(await outcome(bulk, all)).toEqual(await outcome(seq, one));
    const key = (app: TestApp) => queuedKey(app.prefix, digestOf(app, 'slot', { id: 'b' }));
    // Job X (the slot-set entry: BullMQ deduplicated the fast-path one) holds a slot of slot(b), as sequentially.
    expect(await owners(redis, key(bulk))).toEqual(await owners(redis, key(seq)));
    // lockLimit 2 holds: two more adds of b leave as many jobs as sequentially.
    for (const app of [seq, bulk]) {
      await app.queue.add('slot', { id: 'b', n: 10 });
      await app.queue.add('slot', { id: 'b', n: 11 });
    }
    expect(await bulk.queue.count()).toBe(await seq.queue.count());
  });

  it('plain entry with jobId Y, then slot-set entries: the one repeating Y is that job, the next two are new', async () => {
    const list: Entry[] = [
      { name: 'plain', data: { id: 'p', n: 0 }, opts: { jobId: 'Y' } },
      { name: 'slot', data: { id: 'c', n: 1 }, opts: { jobId: 'Y' } },
      { name: 'slot', data: { id: 'c', n: 2 } },
      { name: 'slot', data: { id: 'c', n: 3 } },
    ];
    const { seq, bulk, one, all } = await both(list);
    expect(await outcome(bulk, all)).toEqual(await outcome(seq, one));
    expect(await bulk.queue.count()).toBe(await seq.queue.count());
  });

  it('a repeated jobId whose first entry was held: the second is its own new job (as sequential)', async () => {
    const list: Entry[] = [
      { name: 'slot', data: { id: 'h', n: 0 } },
      { name: 'slot', data: { id: 'h', n: 1 } },
      { name: 'slot', data: { id: 'h', n: 2 }, opts: { jobId: 'Z' } }, // held
      { name: 'slot', data: { id: 'k', n: 3 }, opts: { jobId: 'Z' } }, // new job Z
      { name: 'slot', data: { id: 'k', n: 4 }, opts: { jobId: 'Z' } }, // that job
    ];
    const { seq, bulk, one, all } = await both(list);
    const shape = (o: (string | number)[]) => o.map((v) => (typeof v === 'number' ? `dup of ${list[v].data.id}` : v));
    expect(shape(await outcome(bulk, all))).toEqual(shape(await outcome(seq, one)));
    const key = (app: TestApp) => queuedKey(app.prefix, digestOf(app, 'slot', { id: 'k' }));
    expect(await owners(redis, key(bulk))).toEqual(await owners(redis, key(seq)));
    expect(await bulk.queue.count()).toBe(await seq.queue.count());
  });
});
