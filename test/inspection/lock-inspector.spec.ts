// The lock inspector (lib/ops/inspection/) against real locks taken by a real app on the run's Redis: every storage of a
// lock (BullMQ deduplication key, general-path sorted set, run-time sorted set), owner job lookup, filters, paging,
// release, counts, queue discovery, and the validation of user-supplied digests and cursors.
import { describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { InvalidCursorError, InvalidDigestError, LockInspector, type HeldLock } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, dedupKey, digestOf, queuedKey, runningKey, removeUnguarded, runtimeOwner } from '../support/locks.js';
import { bullOptions, bullPrefix, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

type Data = { id: string; n?: number };

describe('LockInspector', () => {
  const { redis, start, onCleanup } = useApps('insp', {
    unique: { lock: 'until_executed', lockArgs: byId },
    paused: true,
  });

  const inspectorOf = (app: TestApp) =>
    new LockInspector({ client: redis, prefix: app.prefix, queues: [{ name: app.queue.name, prefix: bullPrefix() }] });

  /** Every lock of a filter, page after page. */
  async function listAll(inspector: LockInspector, limit: number, filter = {}): Promise<HeldLock[][]> {
    const pages: HeldLock[][] = [];
    let cursor: string | undefined;
    do {
      const page = await inspector.listLocks(filter, { cursor, limit });
      expect(page.locks.length).toBeLessThanOrEqual(limit);
      pages.push(page.locks);
      cursor = page.cursor;
    } while (cursor !== '0');
    return pages;
  }

  it('lists and shows a fast-path lock (BullMQ deduplication key) with its waiting owner job', async () => {
    const app = await start();
    const job = await app.queue.add('job', { id: 'a', n: 1 });
    const digest = digestOf(app, 'job', { id: 'a' });
    const inspector = inspectorOf(app);
    const owner = { jobId: job.id, jobState: 'waiting', jobName: 'job', since: job.timestamp, queue: app.queue.name };

    expect(await inspector.listLocks()).toEqual({
      cursor: '0',
      locks: [
        {
          digest,
          kind: 'enqueue',
          storage: 'deduplication',
          key: dedupKey(app.queue.name, digest),
          queue: app.queue.name,
          owners: [owner],
        },
      ],
    });
    const shown = await inspector.showLock(digest);
    expect(shown).toEqual([
      expect.objectContaining({
        digest,
        storage: 'deduplication',
        owners: [{ ...owner, dataSummary: JSON.stringify({ id: 'a', n: 1 }) }],
      }),
    ]);
    // The bare hex (and uppercase hex) name the same digest.
    expect(await inspector.showLock(digest.slice(3).toUpperCase())).toEqual(shown);
    expect(await inspector.showLock(`v1:${'0'.repeat(64)}`)).toEqual([]);
  });

  it('shows a general-path lock (lockLimit 2): both owners with their leases, and an owner whose job is gone', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2, lockTtl: 60_000 } });
    const first = await app.queue.add('job', { id: 'a', n: 1 });
    const second = await app.queue.add('job', { id: 'a', n: 2 });
    const digest = digestOf(app, 'job', { id: 'a' });
    const before = Date.now();

    const [lock] = await inspectorOf(app).showLock(digest);
    expect(lock).toMatchObject({ digest, kind: 'enqueue', storage: 'queued', key: queuedKey(app.prefix, digest) });
    expect(lock.queue).toBe(app.queue.name);
    expect(lock.ttlMs).toBeGreaterThan(0);
    expect(lock.owners.map((owner) => owner.jobId).sort()).toEqual([first.id, second.id].sort());
    for (const owner of lock.owners) {
      expect(owner).toMatchObject({ jobState: 'waiting', jobName: 'job', queue: app.queue.name });
      expect(owner.leaseExpiresAt).toBeGreaterThan(before);
    }

    await removeUnguarded(app.queue.name, second.id!); // behind the library's back: the slot stays until the lease ends
    const [after] = (await inspectorOf(app).listLocks()).locks;
    expect(after.owners.find((owner) => owner.jobId === second.id)).toEqual({
      jobId: second.id,
      leaseExpiresAt: expect.any(Number),
      jobState: 'missing',
    });
    expect(after.owners.find((owner) => owner.jobId === first.id)?.jobState).toBe('waiting');
  });

  it('tells a waiting owner behind more than 10,000 waiting jobs without walking the whole list', async () => {
    const app = await start();
    const holder = await app.queue.add('job', { id: 'deep' });
    // 10,050 plain jobs added after it (a queue of its own would not do: the holder must be deep in its list).
    const plain = new Queue(app.queue.name, bullOptions());
    try {
      for (let i = 0; i < 10_050; i += 1_000) {
        const bulk = Array.from({ length: Math.min(1_000, 10_050 - i) }, (_, j) => ({ name: 'plain', data: i + j }));
        await plain.addBulk(bulk);
      }
    } finally {
      await plain.close();
    }
    const waitKey = `${bullPrefix()}:${app.queue.name}:wait`;
    const pausedKey = `${bullPrefix()}:${app.queue.name}:paused`;
    const listKey = (await redis.llen(waitKey)) > 0 ? waitKey : pausedKey;
    expect(await redis.llen(listKey)).toBe(10_051);
    // Past the probe's 10,000 entries, in no other state: waiting, as BullMQ's getState (which walks it all) says.
    expect(await redis.lpos(listKey, holder.id!, 'MAXLEN', 10_000)).toBeNull();
    expect(await holder.getState()).toBe('waiting');
    const [lock] = await inspectorOf(app).showLock(digestOf(app, 'job', { id: 'deep' }));
    expect(lock.owners).toEqual([expect.objectContaining({ jobId: holder.id, jobState: 'waiting', jobName: 'job' })]);
  });

  it('shows a run-time lock held by an active job next to the enqueue lock of its queued duplicate', async () => {
    const started = deferred();
    const gate = hold();
    const app = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId },
      paused: false,
      handler: async () => {
        started.resolve();
        await gate.promise;
      },
    });
    const running = await app.queue.add('job', { id: 'a', n: 1 });
    await started.promise;
    const digest = digestOf(app, 'job', { id: 'a' });
    // The running job gave its enqueue lock back at start, so a duplicate is admitted and waits.
    const queued = await app.queue.add('job', { id: 'a', n: 2 });
    expect(queued.id).not.toBe(running.id);
    const inspector = inspectorOf(app);

    const shown = await inspector.showLock(digest);
    expect(shown.map((lock) => [lock.storage, lock.owners.map((o) => [o.jobId, o.jobState])])).toEqual([
      ['running', [[running.id, 'active']]],
      ['deduplication', [[queued.id, 'waiting']]],
    ]);
    expect(shown[0]).toMatchObject({ kind: 'runtime', key: runningKey(app.prefix, digest), queue: app.queue.name });
    expect(shown[0].owners[0].leaseExpiresAt).toBeGreaterThan(Date.now() - 1000);

    expect((await inspector.listLocks({ kind: 'runtime' })).locks.map((lock) => lock.storage)).toEqual(['running']);
    expect((await inspector.listLocks({ kind: 'enqueue' })).locks.map((lock) => lock.storage)).toEqual([
      'deduplication',
    ]);

    // Releasing one kind leaves the other.
    expect(await inspector.releaseLock(digest, 'runtime')).toBe(1);
    expect(await redis.exists(runningKey(app.prefix, digest))).toBe(0);
    expect(await redis.get(dedupKey(app.queue.name, digest))).toBe(queued.id);
    expect(await inspector.releaseLock(digest)).toBe(1);
    expect(await redis.exists(dedupKey(app.queue.name, digest))).toBe(0);
    expect(await inspector.showLock(digest)).toEqual([]);
    expect(await inspector.releaseLock(digest)).toBe(0);
  });

  it('finds the owner in the right queue when another queue has a job with the same id', async () => {
    const started = deferred();
    const gate = hold();
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId },
      paused: false,
      handler: async () => {
        started.resolve();
        await gate.promise;
      },
    });
    const running = await app.queue.add('job', { id: 'a' }); // no enqueue lock: BullMQ's own id, "1"
    await started.promise;
    // A queue listed first (its name sorts first) whose job has the same id but is only waiting.
    const other = new Queue(uniqueName('aaa'), bullOptions());
    onCleanup(async () => {
      await other.obliterate({ force: true });
      await other.close();
    });
    const twin = await other.add('job', { id: 'a' });
    expect(twin.id).toBe(running.id);
    const inspector = new LockInspector({
      client: redis,
      prefix: app.prefix,
      queues: [other, app.queue].map((queue) => ({ name: queue.name, prefix: bullPrefix() })),
    });

    const [lock] = await inspector.showLock(digestOf(app, 'job', { id: 'a' }));
    expect(lock).toMatchObject({ storage: 'running', queue: app.queue.name });
    expect(lock.owners).toEqual([
      expect.objectContaining({ jobId: running.id, jobState: 'active', queue: app.queue.name }),
    ]);
  });

  it('reads the owner of a run-time lock across queues (queue and id) as that job of that queue', async () => {
    const started = deferred();
    const gate = hold();
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, uniqueAcross: 'queues' },
      paused: false,
      handler: async () => {
        started.resolve();
        await gate.promise;
      },
    });
    const running = await app.queue.add('job', { id: 'a' });
    await started.promise;
    const digest = digestOf(app, 'job', { id: 'a' });
    expect(await redis.zrange(runningKey(app.prefix, digest), 0, '-1')).toEqual([runtimeOwner(app, running.id!)]);
    const inspector = inspectorOf(app);
    const [lock] = await inspector.showLock(digest);
    expect(lock).toMatchObject({ storage: 'running', queue: app.queue.name });
    expect(lock.owners).toEqual([
      expect.objectContaining({ jobId: running.id, jobState: 'active', queue: app.queue.name }),
    ]);
    expect((await inspector.listLocks({ jobId: running.id! })).locks.map((held) => held.digest)).toEqual([digest]);
    // Its queue named, the owner is read there even by an inspector not told of that queue (not shown as missing).
    const blind = new LockInspector({ client: redis, prefix: app.prefix, queues: [] });
    expect((await blind.showLock(digest))[0].owners).toEqual([
      expect.objectContaining({ jobId: running.id, jobState: 'active', queue: app.queue.name }),
    ]);
    gate.resolve();
  });

  it('filters by digest prefix, digest pattern, owner job, kind and queue', async () => {
    const app = await start();
    const jobs = new Map<string, string>();
    for (const id of ['a', 'b', 'c']) jobs.set(id, (await app.queue.add('job', { id } satisfies Data)).id!);
    const digests = new Map([...jobs.keys()].map((id) => [id, digestOf(app, 'job', { id })]));
    const inspector = inspectorOf(app);
    const digestsOf = async (filter: Parameters<LockInspector['listLocks']>[0]) =>
      (await inspector.listLocks(filter)).locks.map((lock) => lock.digest).sort();

    expect(await digestsOf({})).toEqual([...digests.values()].sort());
    expect(await digestsOf({ digest: digests.get('a')!.slice(0, 12) })).toEqual([digests.get('a')]);
    expect(await digestsOf({ digest: digests.get('a')!.slice(3, 12) })).toEqual([digests.get('a')]);
    expect(await digestsOf({ pattern: `*${digests.get('b')!.slice(-6)}` })).toEqual([digests.get('b')]);
    expect(await digestsOf({ pattern: `${digests.get('c')!.slice(3, 10)}?${digests.get('c')!.slice(11)}` })).toEqual([
      digests.get('c'),
    ]);
    expect(await digestsOf({ jobId: jobs.get('c') })).toEqual([digests.get('c')]);
    expect(await digestsOf({ kind: 'enqueue', queue: app.queue.name })).toHaveLength(3);
    expect(await digestsOf({ kind: 'runtime' })).toEqual([]);
    expect(await digestsOf({ queue: 'another-queue' })).toEqual([]);
  });

  it('pages through every lock with a bounded page size', async () => {
    const app = await start({ unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 } });
    const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    for (const id of ids) await app.queue.add('job', { id });
    const expected = ids.map((id) => digestOf(app, 'job', { id })).sort();

    const pages = await listAll(inspectorOf(app), 3);
    // As with SCAN, a lock may be listed twice where other clients' keys change the batches between pages.
    const seen = new Set(pages.flat().map((lock) => lock.digest));
    expect([...seen].sort()).toEqual(expected);
    expect(pages.flat().every((lock) => lock.storage === 'expiring' && lock.kind === 'enqueue')).toBe(true);
    expect(pages.filter((page) => page.length > 0).length).toBeGreaterThanOrEqual(3);
  });

  it('counts enqueue locks, run-time locks and dead-set entries', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' } });
    await app.queue.add('job', { id: 'a' });
    await app.queue.add('job', { id: 'b' });
    await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 }); // rejected: kept in the dead set
    expect(await inspectorOf(app).counts()).toEqual({ enqueueLocks: 2, runtimeLocks: 0, deadSet: 1, complete: true });
  });

  it('stops counting at its SCAN budget and says the counts are lower bounds', async () => {
    const app = await start({ unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 } });
    const ids = Array.from({ length: 40 }, (_, i) => `id-${i}`);
    await app.queue.addBulk(ids.map((id) => ({ name: 'job', data: { id } })));
    const inspector = inspectorOf(app);
    // One SCAN call of COUNT 1 sees one hash bucket of a key space holding at least these 40 keys: never all of it.
    const cut = await inspector.counts({ maxScans: 1, scanCount: 1 });
    expect(cut.complete).toBe(false);
    expect(cut.enqueueLocks).toBeLessThan(ids.length);
    expect(cut.deadSet).toBe(0);
    expect(await inspector.counts()).toEqual({ enqueueLocks: 40, runtimeLocks: 0, deadSet: 0, complete: true });
    // Budgets that are not positive integers fall back to the defaults; Infinity is no limit.
    expect(await inspector.counts({ maxScans: Number.NaN, scanCount: -5 })).toMatchObject({ complete: true });
    expect(await inspector.counts({ maxScans: Infinity, scanCount: 100 })).toEqual({
      enqueueLocks: 40,
      runtimeLocks: 0,
      deadSet: 0,
      complete: true,
    });
  });

  it('discovers the queues under a BullMQ prefix', async () => {
    const app = await start();
    // BullMQ writes the meta key right after the queue connects (no event tells when).
    await waitFor('the queue meta key', () => redis.exists(`${bullPrefix()}:${app.queue.name}:meta`));
    const queues = await LockInspector.discoverQueues(redis, bullPrefix());
    expect(queues).toContainEqual({ name: app.queue.name, prefix: bullPrefix() });
    expect(queues.every((queue) => !queue.name.includes(':'))).toBe(true);
  });

  it('rejects a digest, prefix, pattern or cursor that is not hex before touching any key', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'a' });
    const digest = digestOf(app, 'job', { id: 'a' });
    const inspector = inspectorOf(app);

    for (const bad of ['zz', 'v1:abc', `v1:${'g'.repeat(64)}`, '*', `../${digest}`, `${digest}}:x`, '']) {
      await expect(inspector.showLock(bad)).rejects.toThrow(InvalidDigestError);
      await expect(inspector.releaseLock(bad)).rejects.toThrow(/must be hex|64 hex characters/);
    }
    await expect(inspector.listLocks({ digest: 'x*' })).rejects.toThrow(InvalidDigestError);
    await expect(inspector.listLocks({ digest: '*' })).rejects.toThrow(InvalidDigestError);
    await expect(inspector.listLocks({ pattern: 'a[b]' })).rejects.toThrow(InvalidDigestError);
    await expect(inspector.listLocks({ pattern: `${app.prefix}*` })).rejects.toThrow(InvalidDigestError);
    await expect(inspector.listLocks({}, { cursor: 'abc' })).rejects.toThrow(InvalidCursorError);
    await expect(inspector.listLocks({}, { cursor: '1.2.3' })).rejects.toThrow(InvalidCursorError);
    // A batch's end is a SCAN cursor too: past 2^64 - 1 Redis would refuse it.
    await expect(inspector.listLocks({}, { cursor: 'n0.0.5-99999999999999999999' })).rejects.toThrow(
      InvalidCursorError,
    );
    // A cursor a Redis Cluster listing made names a master by its place: it means nothing on a single Redis.
    await expect(inspector.listLocks({}, { cursor: 'n0.0.0.0123abcd' })).rejects.toThrow(/made on a Redis Cluster/);
    expect(await redis.get(dedupKey(app.queue.name, digest))).not.toBeNull();
  });
});
