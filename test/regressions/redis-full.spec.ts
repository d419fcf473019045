// Found by a hostile review (session 27): at maxmemory with `noeviction`, Redis refuses a script at a write that can
// grow memory when the script has written nothing before it. The idempotency completion's first write was an HSET: a
// handler whose effect had run failed at its completion, its record stayed in progress, and the next delivery took
// the claim over and ran the effect again. A run-time lock's renewal began with `ZADD XX`: every renewal was refused,
// the lease ran out under the running handler and a duplicate of the digest ran beside it. Both now write first what
// grows no memory (the record's or lock's TTL), so they land on a full Redis. (Enqueues and new claims are still
// refused there, with Redis' own "OOM command not allowed" error, and nothing half-written.)
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { captureLogger, EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import type { Redis } from 'ioredis';
import type { TestApp } from '../support/app.js';
import {
  byId,
  dedupKey,
  digestOf,
  expiringKey,
  owners,
  queuedKey,
  runningKey,
  runtimeOwner,
} from '../support/locks.js';
import { ownRedisForFile } from '../support/own-redis.js';
import { enqueuedResult, expectNeverTaken, sampleEntry, useDeadSets } from '../support/dead-sets.js';
import { waitFor } from '../support/wait.js';

// maxmemory is a server setting: this file gets a server of its own.
const server = await ownRedisForFile();

/** Full: every write that can grow memory is refused (`noeviction`, Redis' default policy). */
const full = (on: boolean) => server.admin.config('SET', 'maxmemory', on ? '1' : '0');

describe('Redis at maxmemory (noeviction) while a handler runs', () => {
  const { redis, start, onCleanup } = useApps('full');

  it('@IdempotencyKey on Redis: the completion lands; the next delivery replays it, the effect ran once', async () => {
    const gate = hold();
    const started = deferred();
    let effects = 0;
    const app = await start({
      idempotency: { key: (job: IdempotencyJob<{ id: string }>) => job.data.id, fingerprint: false },
      handler: async (job: Job<{ id: string; first?: boolean }>) => {
        effects++;
        if (job.data.first) {
          started.resolve();
          await gate.promise;
        }
        return { charged: job.data.id };
      },
    });
    onCleanup(() => full(false).then(() => undefined));
    const first = await app.queue.add('charge', { id: 'evt_1', first: true });
    await started.promise;
    await full(true);
    gate.resolve();
    await expect(app.finished(first)).resolves.toEqual({ charged: 'evt_1' });
    await full(false);
    const again = await app.queue.add('charge', { id: 'evt_1' });
    await expect(app.finished(again)).resolves.toEqual({ charged: 'evt_1' });
    expect(effects).toBe(1);
  });

  it('while_executing: renewals land while Redis is full; the lease outlives its first term and no duplicate runs beside it', async () => {
    const gate = hold();
    const started = deferred();
    const lease = 1_500;
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, runtimeLockLease: lease },
      handler: async (job: Job<{ id: string; n: number }>) => {
        if (job.data.n !== 1) return 'duplicate ran';
        started.resolve();
        await gate.promise;
        return 'first';
      },
      worker: { concurrency: 2 },
    });
    onCleanup(() => full(false).then(() => undefined));
    const log = new EventLog(app);
    onCleanup(async () => log.stop());
    const key = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a', n: 1 });
    await started.promise;
    const takenUntil = Number(await redis.zscore(key, runtimeOwner(app, first.id!)));
    await full(true);
    // Renewed (every third of the lease) past the end of the lease first taken, all while Redis is full.
    await waitFor(
      'a renewal past the first lease',
      async () => Number(await redis.zscore(key, runtimeOwner(app, first.id!))) > takenUntil + lease,
    );
    await full(false);
    const duplicate = await app.queue.add('sync', { id: 'a', n: 2 });
    await app.finished(duplicate); // met the lock the first job holds (onConflict 'log': ended without running)
    gate.resolve();
    await expect(app.finished(first)).resolves.toBe('first');
    expect(log.of('lockLost')).toEqual([]);
    expect(app.runs.map((job) => job.id)).toEqual([first.id]);
  });
});

// Same review: `replace` on the slot-set path removed the waiting holder, then its add was refused by the full Redis:
// the enqueue failed and the holder was gone — neither job was left. It now asks Redis whether it takes writes before
// it removes anything (`SET … XX` on a key that never exists: refused like any write that can grow memory).
describe('Redis at maxmemory (noeviction): replace', () => {
  const { redis, start, onCleanup } = useApps('fullrep');

  it.each([
    ['the deduplication key (lockLimit 1)', {}],
    ['the slot set (lockLimit 2)', { lockLimit: 2 }],
    ['an until_expired period', { lock: 'until_expired' as const, lockTtl: 60_000 }],
  ])('%s: the enqueue fails with Redis OOM error, the holders stay with their locks', async (_path, options) => {
    const app = await start({
      paused: true,
      unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'replace', ...options },
    });
    onCleanup(() => full(false).then(() => undefined));
    const holders = [await app.queue.add('price', { id: 'a', n: 1 })];
    if ('lockLimit' in options) holders.push(await app.queue.add('price', { id: 'a', n: 2 }));
    const locksBefore = await heldLocks(redis, app);
    await full(true);
    await expect(app.queue.add('price', { id: 'a', n: 3 })).rejects.toThrow('OOM command not allowed');
    await full(false);
    const waiting = (await app.queue.getJobs(['waiting'])).map((job) => job.data as { n: number });
    expect(waiting.sort(byN)).toEqual(holders.map((job) => job.data as { n: number }));
    expect(await heldLocks(redis, app)).toEqual(locksBefore);
    // Room again: the replacement goes in.
    const replacement = await app.queue.add('price', { id: 'a', n: 3 });
    expect((await app.queue.getJobs(['waiting'])).map((job) => job.id)).toContain(replacement.id);
  });
});

// Session 49's review: a dead-set retry took its entry out, its enqueue was refused by the full Redis, and so was the
// put-back (a write that grows memory, first in its script): the entry was gone and nothing enqueued. The retry now
// claims the entry (a deletion first) and puts it back after a deletion too.
describe('Redis at maxmemory (noeviction): dead-set retry', () => {
  const { start, onCleanup } = useApps('fulldead');

  it("the retry fails with the enqueue's OOM error; the entry stays as it was, and is retried once there is room", async () => {
    const app = await start({ paused: true, unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' } });
    onCleanup(() => full(false).then(() => undefined));
    const holder = await app.queue.add('price', { id: 'a', n: 1 });
    const duplicate = await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 });
    const id = duplicate.status === 'duplicate' ? duplicate.deadSetEntryId! : '';
    const before = await app.service.deadSet.list();
    expect(before.map((entry) => entry.id)).toEqual([id]);
    await holder.remove(); // its digest free: a retry would enqueue
    await full(true);
    await expect(app.service.deadSet.retry(id)).rejects.toThrow('OOM command not allowed');
    await full(false);
    expect(await app.service.deadSet.list()).toEqual(before);
    expect(await app.queue.getWaitingCount()).toBe(0);
    await expect(app.service.deadSet.retry(id)).resolves.toMatchObject({ status: 'enqueued' });
    expect(await app.service.deadSet.size()).toBe(0);
    expect((await app.queue.getJobs(['waiting'])).map((job) => (job.data as { n: number }).n)).toEqual([2]);
  });
});

// Session 49's second review (helper-156): the claim's renewal began with a ZADD, which a full Redis refuses; the claim
// lapsed under a slow enqueue and a second retry took the entry: both enqueued it. It now begins with a deletion.
describe("Redis at maxmemory (noeviction): a dead-set retry's claim", () => {
  const { racing } = useDeadSets('fullclaim');

  it('is renewed while Redis is full: no second retry takes the entry beside a slow enqueue', async () => {
    const { requeues, slow, other } = racing();
    const id = await slow.add(sampleEntry);
    const retrying = slow.retry(id);
    await waitFor('the slow retry in its enqueue', () => requeues.waiting);
    await full(true);
    try {
      await expectNeverTaken(other, id, 1_200); // four leases
    } finally {
      await full(false);
    }
    requeues.release();
    await expect(retrying).resolves.toEqual(enqueuedResult);
    expect([requeues.slowCalls, requeues.fastCalls]).toEqual([1, 0]);
  });
});

const byN = (a: { n: number }, b: { n: number }) => a.n - b.n;

/** Every lock key of the app's digest `{ id: 'a' }` with what it holds (a deduplication key's job, a slot set's). */
async function heldLocks(redis: Redis, app: TestApp): Promise<Record<string, string[]>> {
  const digest = digestOf(app, 'price', { id: 'a' });
  const keys = [dedupKey(app.queue.name, digest), queuedKey(app.prefix, digest), expiringKey(app.prefix, digest)];
  const held: Record<string, string[]> = {};
  for (const key of keys) {
    const type = await redis.type(key);
    if (type === 'string') held[key] = [(await redis.get(key))!];
    if (type === 'zset') held[key] = await owners(redis, key);
  }
  return held;
}

// Same review: under an eviction policy Redis deletes keys to make room — under `volatile-*` the library's first, as
// they have TTLs and BullMQ's do not — and an evicted lock or record let a duplicate in. BullMQ warns; the library
// said nothing, in logs or docs. It now logs an error at bootstrap naming the policy (docs/operations.md).
describe('Redis with an eviction policy', () => {
  const { start, onCleanup } = useApps('evict');

  it.each(['volatile-lru', 'allkeys-lru'])('%s: the bootstrap logs an error naming the policy', async (policy) => {
    await server.admin.config('SET', 'maxmemory-policy', policy);
    onCleanup(async () => void (await server.admin.config('SET', 'maxmemory-policy', 'noeviction')));
    const { logger, lines } = captureLogger();
    await start({ module: { logger }, unique: { lock: 'until_executed', lockArgs: byId } });
    const line = await waitFor('the eviction error', () => lines.error.find((text) => text.includes('evicts keys')));
    expect(line).toContain(`maxmemory-policy ${policy}`);
    expect(line).toContain('set maxmemory-policy noeviction');
  });

  it('noeviction: nothing is logged about it', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({ module: { logger }, unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    // A general-path enqueue runs a script on the library's connection: answered after the bootstrap's INFO, sent first.
    expect((await app.service.enqueue(app.queue, 'sync', { id: 'n1' })).status).toBe('enqueued');
    expect(lines.error).toEqual([]);
  });
});
