// A large `addBulk` on the general path takes every entry's slot before BullMQ's one add of the whole bulk (about 1 s
// per 10,000 entries): longer than the reaper's grace or a slot's 15 s before its holder counts as stale, for a bulk
// large enough. The bulk announces itself while it runs (lib/locks/bulks-in-progress.ts), and neither the reaper nor a
// producer meeting the lock takes its holders for orphans meanwhile. Here the bulk's add is held at a gate, so the
// window between its locks and its add is as long as the test needs.
import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { UniqueJobsReaper, type ReapReport } from '../../lib/index.js';
import { ANNOUNCED_BULK_ENTRIES, BulksInProgress } from '../../lib/locks/bulks-in-progress.js';
import { LockStore } from '../../lib/locks/lock-store.js';
import { BullJobReads } from '../../lib/redis/bull-job-reads.js';
import { DEFAULT_ENQUEUE_LEASE } from '../../lib/options/defaults.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { ReaperPass } from '../../lib/ops/reaper/reaper-pass.js';
import { SuspectConfirmation } from '../../lib/ops/reaper/suspect-confirmation.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { startApp, type TestApp } from '../support/app.js';
import { deferred } from '../support/deferred.js';
import { byId, digestOf, owners, queuedKey, removeUnguarded } from '../support/locks.js';
import { bullOptions, redisClient, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

type BulkJob = { name: string; data: unknown };

describe('a large addBulk taking its general-path locks', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  const queues: Queue[] = [];
  beforeAll(() => {
    redis = redisClient();
  });
  afterEach(async () => {
    await Promise.all(queues.splice(0).map((queue) => queue.close()));
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => {
    await redis.quit();
  });

  const unique = { lock: 'until_executed' as const, lockArgs: byId, lockLimit: 2 };

  async function start(grace: number): Promise<TestApp> {
    const app = await startApp({
      queue: uniqueName('bulk-reap'),
      paused: true,
      unique,
      // A whole pass per run, however loaded the machine: the tests count what one run finds.
      module: { reaper: { interval: false, grace, timeBudget: 60_000 } },
    });
    apps.push(app);
    return app;
  }

  const entries = (count: number, tag: string): BulkJob[] =>
    Array.from({ length: count }, (_, i) => ({ name: 'sync', data: { id: `${tag}-${i}` } }));

  /**
   * A bulk enqueued through the library on a queue of the app's name whose own `addBulk` (the one the library adds
   * through) waits at a gate: `locked` resolves once every lock is taken and the add is waiting.
   */
  function gatedBulk(app: TestApp, jobs: BulkJob[], gate: Promise<void>) {
    const queue = new Queue(app.queue.name, bullOptions());
    queues.push(queue);
    const locked = deferred<void>();
    const addBulk = queue.addBulk.bind(queue);
    queue.addBulk = async (bulk) => {
      locked.resolve();
      await gate;
      return addBulk(bulk);
    };
    const done = app.service.enqueueBulk(queue, jobs);
    done.catch(() => undefined); // awaited by the test; a failure must not go unhandled before then
    return { locked: locked.promise, done };
  }

  const announcements = (app: TestApp) => redis.zcard(new UniqueJobsKeys(app.prefix).bulksInProgress);
  const reaperOf = (app: TestApp) => app.moduleRef.get(UniqueJobsReaper);
  /** The bulk's answer does not wait for its announcement's end (sent right after the add): it comes soon after. */
  const announcementEnded = (app: TestApp) =>
    waitFor('the announcement to end', async () => (await announcements(app)) === 0, 5_000);

  it('the reaper keeps the locks of a bulk still waiting for its add, and checks them again once it is added', async () => {
    const a = await start(50);
    const gate = deferred<void>();
    const jobs = entries(ANNOUNCED_BULK_ENTRIES, 'b');
    const bulk = gatedBulk(a, jobs, gate.promise);
    await bulk.locked;
    expect(await announcements(a)).toBe(1);

    // A dry run meanwhile lists none of them as orphans either.
    const preview = await reaperOf(a).run({ dryRun: true });
    expect(preview.reaped.enqueueLocks).toBe(0);
    expect(preview.deferred).toBe(ANNOUNCED_BULK_ENTRIES);
    const during = await reaperOf(a).run();
    expect(during.reaped.enqueueLocks).toBe(0);
    expect(during.deferred).toBe(ANNOUNCED_BULK_ENTRIES);
    for (const { data } of [jobs[0], jobs.at(-1)!]) {
      expect(await owners(redis, queuedKey(a.prefix, digestOf(a, 'sync', data)))).toHaveLength(1);
    }

    gate.resolve();
    const results = await bulk.done;
    expect(results.every((result) => result.status === 'enqueued')).toBe(true);
    expect(await a.queue.count()).toBe(ANNOUNCED_BULK_ENTRIES);
    await announcementEnded(a);

    // Once the bulk is added its locks are judged again as any other: a job removed behind the library's back frees
    // its slot, the others keep theirs.
    const removed = (results[0] as { job: Job }).job;
    await removeUnguarded(a.queue.name, removed.id!);
    const after = await reaperOf(a).run();
    expect(after.deferred).toBe(0);
    expect(after.reaped.enqueueLocks).toBe(1);
    expect(after.items.map((item) => item.jobId)).toEqual([removed.id]);
    expect(await owners(redis, queuedKey(a.prefix, digestOf(a, 'sync', jobs[0].data)))).toEqual([]);
    expect(await owners(redis, queuedKey(a.prefix, digestOf(a, 'sync', jobs[1].data)))).toHaveLength(1);
  });

  it('a bulk of few general-path entries among many others announces itself too: all are added after its locks', async () => {
    const a = await startApp({
      queue: uniqueName('bulk-reap'),
      paused: true,
      unique: { ...unique, jobName: 'sync' },
      module: { reaper: { interval: false, grace: 50 } },
    });
    apps.push(a);
    const gate = deferred<void>();
    // One entry whose lock is taken before the add, among plain ones (no uniqueness): BullMQ's add of the whole bulk
    // comes after its lock, however few such entries it has.
    const jobs = [
      { name: 'sync', data: { id: 'one' } },
      ...entries(ANNOUNCED_BULK_ENTRIES - 1, 'p').map((job) => ({ ...job, name: 'plain' })),
    ];
    const bulk = gatedBulk(a, jobs, gate.promise);
    await bulk.locked;
    expect(await announcements(a)).toBe(1);
    const during = await reaperOf(a).run();
    gate.resolve();
    await bulk.done;
    expect(during.reaped.enqueueLocks).toBe(0);
    expect(during.deferred).toBe(1);
    expect(await owners(redis, queuedKey(a.prefix, digestOf(a, 'sync', jobs[0].data)))).toHaveLength(1);
    await announcementEnded(a);
  });

  it('a bulk of until_expired entries writes no announcement: their holds are never taken for orphans', async () => {
    const a = await startApp({
      queue: uniqueName('bulk-reap'),
      paused: true,
      unique: { lock: 'until_expired', lockArgs: byId, lockLimit: 2, lockTtl: 60_000 },
      module: { reaper: { interval: false, grace: 0 } },
    });
    apps.push(a);
    const gate = deferred<void>();
    const bulk = gatedBulk(a, entries(ANNOUNCED_BULK_ENTRIES, 'e'), gate.promise);
    await bulk.locked;
    const announced = await announcements(a);
    gate.resolve();
    await bulk.done;
    expect(announced).toBe(0);
  });

  it('a bulk announced only after the reaper found its suspects does not save a true orphan', async () => {
    const a = await start(300);
    const orphan = queuedKey(a.prefix, digestOf(a, 'sync', { id: 'never' }));
    await redis.zadd(orphan, Date.now() + 60_000, 'never-added');
    // Resolves when the run has read the announced bulks, after finding its suspects (before its grace).
    const read = deferred<void>();
    const current = BulksInProgress.prototype.current;
    BulksInProgress.prototype.current = function (this: BulksInProgress) {
      read.resolve();
      return current.call(this);
    };
    let run: Promise<Awaited<ReturnType<UniqueJobsReaper['run']>>>;
    try {
      run = reaperOf(a).run();
      await read.promise;
    } finally {
      BulksInProgress.prototype.current = current;
    }
    const gate = deferred<void>();
    const bulk = gatedBulk(a, entries(ANNOUNCED_BULK_ENTRIES, 'late'), gate.promise);
    await bulk.locked;
    const report = await run;
    gate.resolve();
    await bulk.done;
    expect(report.deferred).toBe(0);
    expect(report.items.map((item) => item.jobId)).toEqual(['never-added']);
    expect(await redis.exists(orphan)).toBe(0);
  });

  it('a bulk announced when the reaper found its suspects but done within the grace does not save a true orphan', async () => {
    const a = await start(50);
    const orphan = queuedKey(a.prefix, digestOf(a, 'sync', { id: 'never' }));
    await redis.zadd(orphan, Date.now() + 60_000, 'never-added');
    // 1,000 entries of two digests: four slots taken (the others are met held), so every suspect fits in one run.
    const gate = deferred<void>();
    const jobs = entries(ANNOUNCED_BULK_ENTRIES, 'd').map((job, i) => ({ ...job, data: { id: `d-${i % 2}` } }));
    const bulk = gatedBulk(a, jobs, gate.promise);
    await bulk.locked;
    // The run reads the bulk announced (after finding its suspects); the bulk is then added and done before the read
    // after the grace.
    const current = BulksInProgress.prototype.current;
    let reads = 0;
    BulksInProgress.prototype.current = async function (this: BulksInProgress) {
      reads += 1;
      if (reads === 1) {
        const found = await current.call(this);
        gate.resolve();
        return found;
      }
      await bulk.done.catch(() => undefined);
      return current.call(this);
    };
    let report: Awaited<ReturnType<UniqueJobsReaper['run']>>;
    try {
      report = await reaperOf(a).run();
    } finally {
      BulksInProgress.prototype.current = current;
    }
    expect(reads).toBe(2);
    expect(report.deferred).toBe(0);
    expect(report.items.map((item) => item.jobId)).toEqual(['never-added']);
    expect(await redis.exists(orphan)).toBe(0);
    for (const id of ['d-0', 'd-1']) {
      expect(await owners(redis, queuedKey(a.prefix, digestOf(a, 'sync', { id })))).toHaveLength(2);
    }
  });

  it('a bulk whose announcement cannot be written is enqueued all the same', async () => {
    const a = await start(0);
    const bulksKey = new UniqueJobsKeys(a.prefix).bulksInProgress;
    await redis.set(bulksKey, 'not a sorted set'); // every write of an announcement fails (WRONGTYPE)
    try {
      const jobs = entries(ANNOUNCED_BULK_ENTRIES, 'w');
      const results = await gatedBulk(a, jobs, Promise.resolve()).done;
      expect(results.every((result) => result.status === 'enqueued')).toBe(true);
      expect(await a.queue.count()).toBe(ANNOUNCED_BULK_ENTRIES);
    } finally {
      await redis.del(bulksKey);
    }
  });

  it('a smaller bulk writes no announcement; a failed add ends the announcement and gives the locks back', async () => {
    const a = await start(0);
    const small = gatedBulk(a, entries(ANNOUNCED_BULK_ENTRIES - 1, 's'), Promise.resolve());
    await small.locked;
    expect(await announcements(a)).toBe(0);
    await small.done;

    const gate = deferred<void>();
    const jobs = entries(ANNOUNCED_BULK_ENTRIES, 'f');
    const failing = gatedBulk(a, jobs, gate.promise);
    await failing.locked;
    expect(await announcements(a)).toBe(1);
    gate.reject(new Error('the add failed'));
    await expect(failing.done).rejects.toThrow('the add failed');
    await announcementEnded(a);
    expect(await owners(redis, queuedKey(a.prefix, digestOf(a, 'sync', jobs[0].data)))).toEqual([]);
  });

  it("a producer that finds a holder's job missing just before the bulk adds it and ends its announcement keeps it", async () => {
    const a = await start(0);
    const x = { id: 'x' };
    // Two entries of one digest (lockLimit 2: they fill its slot set), the rest to make the bulk an announced one.
    const jobs = [{ name: 'sync', data: x }, { name: 'sync', data: x }, ...entries(ANNOUNCED_BULK_ENTRIES - 2, 'r')];
    const gate = deferred<void>();
    const bulk = gatedBulk(a, jobs, gate.promise);
    await bulk.locked;
    const key = queuedKey(a.prefix, digestOf(a, 'sync', x));
    const holders = await redis.zrange(key, '0', '-1', 'WITHSCORES');
    expect(holders).toHaveLength(4);
    // The bulk's holders of x look a minute old (as in a bulk that has been taking its locks that long).
    for (let i = 0; i < holders.length; i += 2)
      await redis.zadd(key, 'XX', Number(holders[i + 1]) - 60_000, holders[i]);
    // The producer reads a holder's job (missing: the bulk has not added it yet); the bulk is then added and ends its
    // announcement before the producer reads the announcements.
    const jobOptions = BullJobReads.prototype.options;
    let raced = false;
    BullJobReads.prototype.options = async function (this: BullJobReads, jobKey: string) {
      const found = await jobOptions.call(this, jobKey);
      if (!raced && found === undefined && holders.some((holder) => jobKey.endsWith(`:${holder}`))) {
        raced = true;
        gate.resolve();
        await bulk.done;
      }
      return found;
    };
    let result: Awaited<ReturnType<TestApp['service']['enqueue']>>;
    try {
      result = await a.service.enqueue(a.queue, 'sync', x);
    } finally {
      BullJobReads.prototype.options = jobOptions;
    }
    expect(raced).toBe(true);
    expect(await a.queue.getJob(holders[0])).toBeDefined();
    expect(await a.queue.getJob(holders[2])).toBeDefined();
    // Both slots still belong to the bulk's two jobs, which exist: the producer's job is a duplicate.
    expect(result.status).not.toBe('enqueued');
    expect((await owners(redis, key)).sort()).toEqual([holders[0], holders[2]].sort());
  });

  it('a producer meeting old holders whose jobs are missing leaves them while a bulk older than them is announced', async () => {
    const a = await start(0);
    const data = { id: 'old' };
    const key = queuedKey(a.prefix, digestOf(a, 'sync', data));
    const bulksKey = new UniqueJobsKeys(a.prefix).bulksInProgress;
    // Two holders taken a minute ago (their lease has a minute less left), whose jobs do not exist (yet).
    const [seconds, micros] = await redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const leaseEnd = now + DEFAULT_ENQUEUE_LEASE - 60_000;
    await redis.zadd(key, leaseEnd, 'on-its-way-1', leaseEnd, 'on-its-way-2');
    // A bulk that began two minutes ago (announced as the library announces one): it may have taken them.
    const older = `${now - 120_000}:L${DEFAULT_ENQUEUE_LEASE}:older-bulk`;
    await redis.zadd(bulksKey, now + 60_000, older);
    try {
      expect((await a.service.enqueue(a.queue, 'sync', data)).status).not.toBe('enqueued');
      expect((await owners(redis, key)).sort()).toEqual(['on-its-way-1', 'on-its-way-2']);
    } finally {
      await redis.zrem(bulksKey, older);
    }
    // A bulk that began after they were taken cannot hold them: they are stale, dropped as they are met, and the job
    // gets a slot.
    const bulks = new BulksInProgress(new LockStore(new RedisScripts(redis)), new UniqueJobsKeys(a.prefix));
    const end = await bulks.begin(DEFAULT_ENQUEUE_LEASE, ANNOUNCED_BULK_ENTRIES);
    try {
      // Its token carries its start on the server's clock, which tells its age whatever its renewals did.
      const [token] = await redis.zrange(bulksKey, '0', '-1');
      expect(Math.abs(Number(token.split(':')[0]) - now)).toBeLessThan(10_000);
      const [{ ageMs }] = await bulks.current();
      expect(ageMs).toBeGreaterThanOrEqual(0);
      expect(ageMs).toBeLessThan(10_000);
      expect((await a.service.enqueue(a.queue, 'sync', data)).status).toBe('enqueued');
      expect(await owners(redis, key)).not.toContain('on-its-way-1');
    } finally {
      await end();
    }
  });

  it('suspects kept back are confirmed again at the next run, whether or not its walk finds them again', async () => {
    const keys = new UniqueJobsKeys(uniqueName('kept'));
    const store = new LockStore(new RedisScripts(redis));
    const bulks = new BulksInProgress(store, keys);
    const confirmation = new SuspectConfirmation(bulks, { grace: 10, batchSize: 500, maxKept: 1000 });
    const pass = new ReaperPass(
      redis,
      500,
      () => [],
      () => Promise.resolve({ names: [], full: false }),
    );
    const key = keys.enqueueLock('v1:' + 'e'.repeat(64));
    const lease = String(Date.now() + 60_000);
    await redis.zadd(key, lease, 'gone-job');
    const item = { key, kind: 'enqueueLock' as const, jobId: 'gone-job', reason: 'job gone' };
    const suspect = {
      item,
      statuses: () => Promise.resolve(['gone' as const]),
      release: () => store.releaseLease(key, 'gone-job', lease),
    };
    const released: unknown[] = [];
    const run = async (found: (typeof suspect)[]) => {
      const report = { deferred: 0 } as ReapReport;
      await confirmation.confirm(found, pass, report, { record: (i) => released.push(i), failed: () => undefined });
      return report.deferred;
    };
    const end = await bulks.begin(DEFAULT_ENQUEUE_LEASE, ANNOUNCED_BULK_ENTRIES);
    try {
      expect(await run([suspect])).toBe(1);
      expect(await run([suspect])).toBe(1); // found again and kept back: confirmed once
      expect(released).toEqual([]);
      expect(await owners(redis, key)).toEqual(['gone-job']);
    } finally {
      await end();
    }
    expect(await run([])).toBe(0); // not found by this run's walk: confirmed all the same
    expect(released).toEqual([item]);
    expect(await redis.exists(key)).toBe(0);
  });

  it('a producer whose options give a longer lease than the bulk’s keeps the holders of a bulk begun just before', async () => {
    // The bulk's producer runs options with a lockTtl of a minute (a deploy that has not rolled out yet); the other's
    // have none (the 24 h default lease). By its own lease a slot the bulk just took looks almost a day old.
    const a = await startApp({
      queue: uniqueName('bulk-reap'),
      paused: true,
      unique: { ...unique, lockTtl: 60_000 },
      module: { reaper: { interval: false, grace: 0 } },
    });
    apps.push(a);
    const b = await startApp({
      queue: a.queue.name,
      paused: true,
      unique,
      module: { prefix: a.prefix, reaper: { interval: false, grace: 0 } },
    });
    apps.push(b);
    const x = { id: 'x' };
    expect(digestOf(b, 'sync', x)).toBe(digestOf(a, 'sync', x));
    const jobs = [{ name: 'sync', data: x }, { name: 'sync', data: x }, ...entries(ANNOUNCED_BULK_ENTRIES - 2, 'l')];
    const gate = deferred<void>();
    const bulk = gatedBulk(a, jobs, gate.promise);
    await bulk.locked;
    const key = queuedKey(a.prefix, digestOf(a, 'sync', x));
    const holders = await owners(redis, key);
    expect(holders).toHaveLength(2);
    let result: Awaited<ReturnType<TestApp['service']['enqueue']>>;
    try {
      result = await b.service.enqueue(b.queue, 'sync', x);
    } finally {
      gate.resolve();
    }
    await bulk.done;
    expect(result.status).not.toBe('enqueued');
    expect((await owners(redis, key)).sort()).toEqual(holders.sort());
    await announcementEnded(a);
  });

  describe('the announcement itself', () => {
    const announcer = (leaseMs?: number) => {
      const keys = new UniqueJobsKeys(uniqueName('announce'));
      return {
        key: keys.bulksInProgress,
        bulks: new BulksInProgress(new LockStore(new RedisScripts(redis)), keys, leaseMs),
      };
    };
    /** Ms left on each token's lease, by the server's clock. */
    const leasesLeft = async (key: string) => {
      const [seconds, micros] = await redis.time();
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const scored = await redis.zrange(key, '0', '-1', 'WITHSCORES');
      return scored.flatMap((value, i) => (i % 2 === 1 ? [Number(value) - now] : []));
    };

    it('lives longer for a larger bulk, whose sending blocks its producer longer (no renewal meanwhile)', async () => {
      const { key, bulks } = announcer();
      const small = await bulks.begin(DEFAULT_ENQUEUE_LEASE, ANNOUNCED_BULK_ENTRIES);
      try {
        const [left] = await leasesLeft(key);
        expect(left).toBeGreaterThan(55_000);
        expect(left).toBeLessThanOrEqual(60_000);
      } finally {
        await small();
      }
      const large = await bulks.begin(DEFAULT_ENQUEUE_LEASE, 1_000_000); // 250 µs per entry
      try {
        const [left] = await leasesLeft(key);
        expect(left).toBeGreaterThan(245_000);
        expect(left).toBeLessThanOrEqual(250_000);
      } finally {
        await large();
      }
      expect(await redis.exists(key)).toBe(0);
    });

    it('takes its token again, under the same name, when a renewal finds its lease ended', async () => {
      const { key, bulks } = announcer(600); // renewed every 200 ms
      const end = await bulks.begin(DEFAULT_ENQUEUE_LEASE, ANNOUNCED_BULK_ENTRIES);
      try {
        const [token] = await redis.zrange(key, '0', '-1');
        const [{ ageMs: before }] = await bulks.current();
        await redis.del(key); // as a lease that ended during a stall of the producer's event loop
        // The next renewal writes it back: the same token, so the bulk's age still counts from its start.
        const retaken = () => redis.zrange(key, '0', '-1').then((tokens) => tokens.length > 0 && tokens);
        expect(await waitFor('the token to be taken again', retaken, 5_000)).toEqual([token]);
        const [{ ageMs: after }] = await bulks.current();
        expect(after).toBeGreaterThanOrEqual(before);
        expect((await leasesLeft(key))[0]).toBeGreaterThan(0);
      } finally {
        await end();
      }
      expect(await redis.exists(key)).toBe(0);
    });
  });
});
