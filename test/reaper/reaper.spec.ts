import { firstValueFrom, filter } from 'rxjs';
import Database from 'better-sqlite3';
import { Queue, type JobsOptions } from 'bullmq';
import { Redis as IORedis, type Redis } from 'ioredis';
import { connectedScanNodes } from '../../lib/redis/scan.js';
import {
  OrphanReaper,
  RedisIdempotencyStore,
  SqliteIdempotencyStore,
  UniqueJobsReaper,
  type ReapReport,
  type UniqueJobEvent,
} from '../../lib/index.js';
import { startApp, type TestApp, type TestAppOptions } from '../support/app.js';
import { deferred } from '../support/deferred.js';
import {
  byId,
  dedupKey,
  digestOf,
  enqueuedJob,
  expiringKey,
  owners,
  queuedKey,
  runningKey,
  removeUnguarded,
} from '../support/locks.js';
import { bullOptions, bullPrefix, redisClient, redisOptions, scanKeys, uniqueName } from '../support/redis.js';

describe('the orphan reaper', () => {
  let redis: Redis;
  const apps: TestApp[] = [];
  beforeAll(() => {
    redis = redisClient();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => {
    await redis.quit();
  });

  /** An app whose reaper runs only on demand, with no grace (tests remove jobs before the run, never during it). */
  async function start(options: Partial<TestAppOptions> & Pick<TestAppOptions, 'unique'>): Promise<TestApp> {
    const app = await startApp({
      queue: uniqueName('reap'),
      paused: true,
      ...options,
      module: { reaper: { interval: false, grace: 0 }, ...options.module },
    });
    apps.push(app);
    return app;
  }
  const reaperOf = (app: TestApp) => app.moduleRef.get(UniqueJobsReaper);
  const jobKey = (app: TestApp, id: string) => `${bullPrefix()}:${app.queue.name}:${id}`;

  describe('fast-path enqueue locks (BullMQ deduplication keys)', () => {
    it('releases a key whose job was deleted outside BullMQ', async () => {
      const a = await start({ unique: { lock: 'until_executed', lockArgs: byId } });
      const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'x1' }));
      const key = dedupKey(a.queue.name, digestOf(a, 'sync', { id: 'x1' }));
      await redis.del(jobKey(a, job.id!));

      const report = await reaperOf(a).run();

      expect(await redis.exists(key)).toBe(0);
      expect(report.reaped.deduplicationKeys).toBe(1);
      expect(report.items).toContainEqual({ key, kind: 'deduplicationKey', jobId: job.id, reason: 'job gone' });
      expect((await a.service.enqueue(a.queue, 'sync', { id: 'x1' })).status).toBe('enqueued');
    });

    it('releases a key whose job finished without releasing it, and keeps the keys of waiting jobs', async () => {
      const a = await start({ unique: { lock: 'until_executed', lockArgs: byId } });
      const done = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'done' }));
      a.start();
      await a.finished(done);
      await a.moduleRef.get(UniqueJobsReaper).run();
      // A key left behind by a finished job (as a failed release after a lockTtl lock would leave it).
      const leftover = dedupKey(a.queue.name, digestOf(a, 'sync', { id: 'done' }));
      await redis.set(leftover, done.id!);
      await a.queue.pause();
      const waiting = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'waiting' }));
      const live = dedupKey(a.queue.name, digestOf(a, 'sync', { id: 'waiting' }));

      const report = await reaperOf(a).run();

      expect(await redis.exists(leftover)).toBe(0);
      expect(report.items).toContainEqual({
        key: leftover,
        kind: 'deduplicationKey',
        jobId: done.id,
        reason: 'job finished',
      });
      expect(await redis.get(live)).toBe(waiting.id);
    });
  });

  describe('general-path enqueue locks', () => {
    const unique = { lock: 'until_executed' as const, lockArgs: byId, lockLimit: 2 };

    it('frees the slot of a job removed behind the library’s back, or with queue.clean / drain / obliterate', async () => {
      const a = await start({ unique });
      const keyOf = (id: string) => queuedKey(a.prefix, digestOf(a, 'sync', { id }));
      const removed = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'r' }));
      const kept = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'r' }));
      await removeUnguarded(a.queue.name, removed.id!);
      await reaperOf(a).run();
      expect(await owners(redis, keyOf('r'))).toEqual([kept.id]);

      for (const id of ['c1', 'c2']) await a.service.enqueue(a.queue, 'sync', { id });
      await a.queue.clean(0, 100, 'wait');
      for (const id of ['d1', 'd2']) await a.service.enqueue(a.queue, 'sync', { id });
      await a.queue.drain();
      const report = await reaperOf(a).run();
      for (const id of ['r', 'c1', 'c2', 'd1', 'd2']) expect(await owners(redis, keyOf(id))).toEqual([]);
      expect(report.reaped.enqueueLocks).toBe(4 + 1); // the kept job went with drain too
      expect(report.items.every((item) => item.reason === 'job gone')).toBe(true);

      await a.service.enqueue(a.queue, 'sync', { id: 'o' });
      await a.queue.obliterate({ force: true });
      await reaperOf(a).run();
      expect(await owners(redis, keyOf('o'))).toEqual([]);
    });

    it('keeps the slots of waiting, delayed and active jobs, and until_expired locks after their job is gone', async () => {
      const release = deferred();
      const started = deferred();
      const a = await start({
        unique: [
          { ...unique, jobName: 'sync' },
          { lock: 'until_expired', lockTtl: 60_000, lockArgs: byId, jobName: 'period' },
        ],
        handler: async () => {
          started.resolve();
          await release.promise;
        },
      });
      const keyOf = (name: string, id: string) => queuedKey(a.prefix, digestOf(a, name, { id }));
      const active = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'act' }));
      a.start();
      await started.promise;
      const waiting = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'w' }));
      const delayed = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'd' }, { delay: 60_000 }));
      const period = enqueuedJob(await a.service.enqueue(a.queue, 'period', { id: 'p' }));
      await period.remove();

      const report = await reaperOf(a).run();

      expect(await owners(redis, keyOf('sync', 'act'))).toEqual([active.id]);
      expect(await owners(redis, keyOf('sync', 'w'))).toEqual([waiting.id]);
      expect(await owners(redis, keyOf('sync', 'd'))).toEqual([delayed.id]);
      expect(await owners(redis, expiringKey(a.prefix, digestOf(a, 'period', { id: 'p' })))).toEqual([period.id]);
      expect(report.reaped.enqueueLocks).toBe(0);
      release.resolve();
      await a.finished(active);
    });

    it('does not release a lock whose job appears during the grace period', async () => {
      const a = await start({ unique, module: { reaper: { interval: false, grace: 300 } } });
      const digest = digestOf(a, 'sync', { id: 'g' });
      // The first half of a general-path enqueue: the lock is taken, the add has not happened yet.
      await redis.zadd(queuedKey(a.prefix, digest), Date.now() + 60_000, 'late-job');
      const run = reaperOf(a).run();
      // The second half: the job, with the library's marker naming the digest it is locked under (added as the library
      // adds it, through the queue's own add: the guarded one would take a lock of its own).
      const plain = new Queue(a.queue.name, bullOptions());
      await plain.add('sync', { id: 'g' }, { jobId: 'late-job', uniqueJobs: { digest } } as JobsOptions);
      await plain.close();
      const report = await run;
      expect(await owners(redis, queuedKey(a.prefix, digest))).toEqual(['late-job']);
      expect(report.reaped.enqueueLocks).toBe(0);
    });

    /**
     * Another application on the library prefix creates its queue after a reaper pass looked for queues, and adds the
     * job of a general-path lock the pass suspects during the grace period. `registry`: what the library's queue
     * registry is meanwhile (as written, full of other names, or a key of the wrong type that cannot be read).
     */
    async function queueCreatedMidPass(registry: 'kept' | 'full' | 'unreadable') {
      // The grace covers the other application's start below (a Nest app: well under a second on a loaded machine).
      const a = await start({ unique, module: { reaper: { interval: false, grace: 5000 } } });
      const registryKey = `${a.prefix}:{queues}:known`;
      if (registry === 'full') {
        await redis.sadd(registryKey, ...Array.from({ length: 1000 }, (_, i) => `bull:${uniqueName('gone')}-${i}`));
      }
      if (registry === 'unreadable') await redis.set(registryKey, 'not a set');
      const digest = 'v1:' + 'c'.repeat(64);
      const orphan = 'v1:' + 'd'.repeat(64);
      // The other application's general-path lock (its job comes below), and an orphan whose job never comes.
      await redis.zadd(queuedKey(a.prefix, digest), Date.now() + 60_000, 'late-job');
      await redis.zadd(queuedKey(a.prefix, orphan), Date.now() + 60_000, 'never-added');
      const nodes = (await connectedScanNodes(redis)).length;
      const discovered = deferred<void>();
      let walked = 0;
      // Resolves once every node's walk over the queues' `meta` keys (the discovery) has ended.
      const scan = IORedis.prototype.scan;
      IORedis.prototype.scan = async function (this: IORedis, ...args: unknown[]) {
        const reply = await (scan as (...a: unknown[]) => ReturnType<typeof scan>).apply(this, args);
        if (String(args[2]).endsWith(':meta') && reply[0] === '0' && ++walked === nodes) discovered.resolve();
        return reply;
      };
      let run: Promise<ReapReport>;
      try {
        run = reaperOf(a).run();
        await discovered.promise;
      } finally {
        IORedis.prototype.scan = scan;
      }
      // The pass's discovery is done: the other application starts now (its queue is recorded in the library's
      // registry at its bootstrap, when it can be) and adds the lock's job, marked with the digest, during the grace.
      const b = await startApp({
        queue: uniqueName('reap-later'),
        paused: true,
        unique,
        module: { prefix: a.prefix, reaper: { interval: false } },
      });
      apps.push(b);
      const plain = new Queue(b.queue.name, bullOptions());
      await plain.add('sync', { id: 'l' }, { jobId: 'late-job', uniqueJobs: { digest } } as JobsOptions);
      await plain.close();
      const report = await run;
      expect(await owners(redis, queuedKey(a.prefix, digest))).toEqual(['late-job']);
      expect(await owners(redis, queuedKey(a.prefix, orphan))).toEqual([]);
      expect(report.items.map((item) => item.jobId)).toEqual(['never-added']);
      // One key a call: on a cluster they live in different slots.
      for (const key of [queuedKey(a.prefix, digest), registryKey]) await redis.del(key);
    }

    it('does not release a lock whose job appears in a queue another application created after the pass looked for queues', async () => {
      await queueCreatedMidPass('kept');
    });

    it('with a full or unreadable queue registry it looks for the queues again before releasing, and still releases orphans', async () => {
      await queueCreatedMidPass('full');
      await Promise.all(apps.splice(0).map((app) => app.close()));
      await queueCreatedMidPass('unreadable');
    });
  });

  it('drops ended leases of run-time locks and leaves live ones to their holder', async () => {
    const a = await start({ unique: { lock: 'while_executing', lockArgs: byId } });
    const ended = runningKey(a.prefix, 'v1:' + 'a'.repeat(64));
    const live = runningKey(a.prefix, 'v1:' + 'b'.repeat(64));
    await redis.zadd(ended, Date.now() - 1000, 'crashed-job');
    // The owner of a lock across queues names its queue: reported by its job id, as every other owner.
    await redis.zadd(ended, Date.now() - 1000, JSON.stringify(['bull:orders', 'crashed-across']));
    await redis.zadd(live, Date.now() + 60_000, 'running-job');
    await redis.pexpire(ended, 60_000);
    await redis.pexpire(live, 60_000);

    const report = await reaperOf(a).run();

    expect(await redis.exists(ended)).toBe(0);
    expect(await owners(redis, live)).toEqual(['running-job']);
    expect(report.items).toContainEqual({
      key: ended,
      kind: 'runtimeLease',
      jobId: 'crashed-job',
      reason: 'lease ended',
    });
    expect(report.items).toContainEqual({
      key: ended,
      kind: 'runtimeLease',
      jobId: 'crashed-across',
      reason: 'lease ended',
    });
  });

  it('releases an idempotency claim whose job is gone once its lease ended, never a live one', async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: byId } });
    const store = new RedisIdempotencyStore({ client: redis, prefix: a.prefix });
    const live = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'live' }));
    const claim = (key: string, jobId: string, leaseMs: number) =>
      store.claim({
        scope: 'reaper-test',
        key,
        owner: `owner-${key}`,
        leaseMs,
        fingerprint: undefined,
        jobId,
        jobKey: jobKey(a, jobId),
      });
    await claim('orphan', 'removed-job', 1);
    await claim('running', live.id!, 1);
    await claim('leased', 'removed-job-2', 60_000);
    const recordKey = (key: string) => store.recordKey('reaper-test', key);
    // The 1 ms leases end by Redis's clock: wait for it rather than sleep a guessed time.
    await waitUntil(async () => Number(await redis.hget(recordKey('orphan'), 'until')) < (await redisNow(redis)));

    const report = await reaperOf(a).run();

    expect(await redis.exists(recordKey('orphan'))).toBe(0);
    expect(await redis.hget(recordKey('running'), 'state')).toBe('in_progress');
    expect(await redis.hget(recordKey('leased'), 'state')).toBe('in_progress');
    expect(report.items).toContainEqual({
      key: recordKey('orphan'),
      kind: 'idempotencyClaim',
      jobId: 'removed-job',
      reason: 'job gone',
    });
    expect(report.reaped.idempotencyClaims).toBe(1);
  });

  it('a dry run reports what it would release and changes nothing', async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'dry' }));
    await removeUnguarded(a.queue.name, job.id!);
    const key = queuedKey(a.prefix, digestOf(a, 'sync', { id: 'dry' }));

    const report = await reaperOf(a).run({ dryRun: true });

    expect(report).toMatchObject({ dryRun: true, leader: true });
    expect(report.items).toEqual([{ key, kind: 'enqueueLock', jobId: job.id, reason: 'job gone' }]);
    expect(await owners(redis, key)).toEqual([job.id]);
    // What health checks read is the last run that changed something, never a dry run's.
    expect(reaperOf(a).lastReport).toBeUndefined();
    const real = await reaperOf(a).run();
    await reaperOf(a).run({ dryRun: true });
    expect(reaperOf(a).lastReport).toBe(real);
  });

  it('works in one process at a time: a second reaper on the prefix does nothing until the leader resigns', async () => {
    const prefix = uniqueName('ujlead');
    const first = new OrphanReaper({ client: redis, prefix, options: { grace: 0 } });
    const second = new OrphanReaper({ client: redis, prefix, options: { grace: 0 } });
    try {
      expect((await first.run()).leader).toBe(true);
      expect((await second.run()).leader).toBe(false);
      expect((await first.run()).leader).toBe(true);
      await first.resign();
      expect((await second.run()).leader).toBe(true);
    } finally {
      await second.resign();
    }
  });

  it.each([
    ['scans in bounded steps: a small time budget spreads one pass over several runs', false],
    ['dry runs walk apart: between the steps of a scheduled pass they skip none of its keys', true],
  ])('%s', async (_label, dryRunsBetween) => {
    const prefix = uniqueName('ujscan');
    const keys = Array.from({ length: 300 }, (_, i) => `${prefix}:{v1:${String(i).padStart(64, '0')}}:running`);
    for (const key of keys) await redis.zadd(key, Date.now() - 1, 'gone');
    const reaper = new OrphanReaper({ client: redis, prefix, options: { grace: 0, batchSize: 20, timeBudget: 1 } });
    try {
      const reports: ReapReport[] = [];
      do {
        reports.push(await reaper.run());
        if (dryRunsBetween) expect((await reaper.run({ dryRun: true })).dryRun).toBe(true);
      } while (!reports.at(-1)!.complete && reports.length < 1000);
      expect(reports.length).toBeGreaterThan(1);
      expect(reports.at(-1)!.complete).toBe(true);
      expect(reports.reduce((sum, report) => sum + report.reaped.runtimeLeases, 0)).toBe(300);
      expect(await scanKeys(redis, `${prefix}:*:running`)).toEqual([]);
    } finally {
      await reaper.resign();
    }
  });

  /** An SQLite store in memory, and a way to insert settled records that expire at `expiresAt`. */
  async function sqliteRecords() {
    const database = new Database(':memory:');
    const store = new SqliteIdempotencyStore({ database });
    await store.migrate();
    const insert = database.prepare(
      `INSERT INTO unique_jobs_idempotency (scope, key, state, attempts, created_at, expires_at, updated_at)
       VALUES ('s', ?, 'completed', 1, 0, ?, 0)`,
    );
    return { database, store, insert: (key: string, expiresAt: number) => void insert.run(key, expiresAt) };
  }

  it('prunes the SQL stores it is given and counts the rows', async () => {
    const { database, store, insert } = await sqliteRecords();
    for (let i = 0; i < 25; i++) insert(`old-${i}`, Date.now() - 1000);
    insert('live', Date.now() + 60_000);
    const prefix = uniqueName('ujprune');
    const reaper = new OrphanReaper({ client: redis, prefix, stores: () => [store], options: { batchSize: 10 } });
    try {
      expect((await reaper.run()).reaped.sqlRecords).toBe(25);
      expect(
        (database.prepare('SELECT key FROM unique_jobs_idempotency').all() as { key: string }[]).map((r) => r.key),
      ).toEqual(['live']);
      expect((await reaper.run({ dryRun: true })).reaped.sqlRecords).toBe(0);
    } finally {
      await reaper.resign();
      database.close();
    }
  });

  // Review (helper-158): the SQL stores were pruned by the leader alone, which may be a process without them (the table
  // then grew without bound), and within the scan's time budget (one batch a run once the scan had spent it).
  it('prunes the SQL stores in every process that has them, leader or not, past the scan time budget', async () => {
    const { database, store, insert } = await sqliteRecords();
    const expire = (from: number) => {
      for (let i = from; i < from + 25; i++) insert(`old-${i}`, Date.now() - 1000);
    };
    const rows = () => (database.prepare('SELECT count(*) AS n FROM unique_jobs_idempotency').get() as { n: number }).n;
    const prefix = uniqueName('ujprunelead');
    // The leader: a process without the SQL store (an API process).
    const leader = new OrphanReaper({ client: redis, prefix, options: { batchSize: 10 } });
    const tuning = { batchSize: 10, timeBudget: 1 }; // the scan's budget is spent before the prune
    const other = new OrphanReaper({ client: redis, prefix, stores: () => [store], options: tuning });
    const alone = new OrphanReaper({
      client: redis,
      prefix: uniqueName('ujprunealone'),
      stores: () => [store],
      options: tuning,
    });
    try {
      expect((await leader.run()).leader).toBe(true);
      expire(0);
      const report = await other.run();
      expect(report.leader).toBe(false);
      expect(report.reaped.sqlRecords).toBe(25);
      expect(rows()).toBe(0);
      expire(100);
      const led = await alone.run();
      expect(led.leader).toBe(true);
      expect(led.reaped.sqlRecords).toBe(25);
      expect(rows()).toBe(0);
    } finally {
      await leader.resign();
      await alone.resign();
      database.close();
    }
  });

  it('keeps the general-path lock of a waiting job in a queue under a BullMQ prefix this application does not use', async () => {
    const prefix = uniqueName('ujforeign'); // the library prefix two applications share
    // A hash-tagged prefix, so the same test runs on a Redis Cluster.
    const queue = new Queue(uniqueName('charges'), {
      connection: redisOptions(),
      prefix: `{${uniqueName('payments')}}`,
    });
    const digest = 'v1:' + 'b'.repeat(64);
    const lock = queuedKey(prefix, digest);
    const reaper = new OrphanReaper({
      client: redis,
      prefix,
      queues: () => [{ name: uniqueName('emails'), prefix: 'bull' }],
      options: { grace: 0 },
    });
    try {
      // The other application's general-path enqueue: the lock, then its job, which waits.
      await redis.zadd(lock, Date.now() + 86_400_000, 'job-b-1');
      await queue.add('charge', { id: 1 }, { jobId: 'job-b-1', uniqueJobs: { digest } } as JobsOptions);
      const report = await reaper.run();
      expect(report.reaped.enqueueLocks).toBe(0);
      expect(await owners(redis, lock)).toEqual(['job-b-1']);
    } finally {
      await reaper.resign();
      await queue.obliterate({ force: true });
      await queue.close();
      await redis.del(lock);
    }
  });

  it('confirms up to maxSuspects after one grace: an operator run releases 1,500 orphans in one run', async () => {
    const prefix = uniqueName('ujmany');
    const reaper = new OrphanReaper({
      client: redis,
      prefix,
      options: { grace: 0, timeBudget: 60_000 },
      maxSuspects: 100_000,
    });
    try {
      // Each key in its own slot: sent together, not as one pipeline (a Cluster refuses a pipeline across slots).
      for (let i = 0; i < 1500; i += 500) {
        await Promise.all(
          Array.from({ length: 500 }, (_, k) =>
            redis.zadd(
              queuedKey(prefix, `v1:${String(i + k).padStart(64, '0')}`),
              Date.now() + 60_000,
              `missing-${i + k}`,
            ),
          ),
        );
      }
      const report = await reaper.run();
      expect(report.complete).toBe(true);
      expect(report.reaped.enqueueLocks).toBe(1500);
      expect(await scanKeys(redis, `${prefix}:*:queued`)).toEqual([]);
    } finally {
      await reaper.resign();
    }
  });

  it('looks for the queues of general-path owners once per pass, not once per lock', async () => {
    const prefix = uniqueName('ujdiscover');
    const client = redisClient();
    let discoveries = 0;
    // Counts the first SCAN call of each walk over the `meta` keys, on any node (the real command still runs).
    const scan = IORedis.prototype.scan;
    IORedis.prototype.scan = function (this: IORedis, ...args: unknown[]) {
      if (args[0] === '0' && String(args[2]).endsWith(':meta')) discoveries++;
      return (scan as (...a: unknown[]) => ReturnType<typeof scan>).apply(this, args);
    };
    const reaper = new OrphanReaper({ client, prefix, options: { grace: 0 } });
    try {
      for (let i = 0; i < 20; i++) {
        await redis.zadd(queuedKey(prefix, `v1:${String(i).padStart(64, '0')}`), Date.now() + 60_000, `missing-${i}`);
      }
      const report = await reaper.run({ dryRun: true });
      expect(report.reaped.enqueueLocks).toBe(20);
      expect(discoveries).toBe((await connectedScanNodes(client)).length);
    } finally {
      IORedis.prototype.scan = scan;
      await reaper.resign();
      await client.quit();
      for (const key of await scanKeys(redis, `${prefix}:*`)) await redis.del(key);
    }
  });

  it('a confirmation whose queues cannot be listed keeps its suspect and fails nothing else; the next run releases it', async () => {
    const prefix = uniqueName('ujconfirm');
    const client = redisClient();
    const lock = queuedKey(prefix, 'v1:' + 'e'.repeat(64));
    // An unreadable registry: the confirmation discovers the queues again, and that discovery fails (a node away).
    await redis.set(`${prefix}:{queues}:known`, 'not a set');
    await redis.zadd(lock, Date.now() + 60_000, 'missing-job');
    let discoveries = 0;
    const scan = IORedis.prototype.scan;
    IORedis.prototype.scan = function (this: IORedis, ...args: unknown[]) {
      if (args[0] === '0' && String(args[2]).endsWith(':meta') && ++discoveries > 1) {
        return Promise.reject<Awaited<ReturnType<typeof scan>>>(new Error('CLUSTERDOWN simulated'));
      }
      return (scan as (...a: unknown[]) => ReturnType<typeof scan>).apply(this, args);
    };
    const reaper = new OrphanReaper({ client, prefix, options: { grace: 0 } });
    try {
      const failed = await reaper.run();
      expect(failed.failedKeys).toBeGreaterThanOrEqual(1);
      expect(failed.reaped.enqueueLocks).toBe(0);
      expect(await owners(redis, lock)).toEqual(['missing-job']);
      IORedis.prototype.scan = scan;
      let report = await reaper.run();
      while (!report.complete && report.reaped.enqueueLocks === 0) report = await reaper.run();
      expect(await owners(redis, lock)).toEqual([]);
    } finally {
      IORedis.prototype.scan = scan;
      await reaper.resign();
      await client.quit();
      for (const key of await scanKeys(redis, `${prefix}:*`)) await redis.del(key);
    }
  });

  it('walks every key once and touches only its own: look-alike prefixes and a queue whose name extends a known one are left alone', async () => {
    const prefix = uniqueName('cls');
    const queuePrefix = `{${uniqueName('bq')}}`; // a hash tag: a deduplication key and its job share a slot on a cluster
    const digest = `v1:${'b'.repeat(64)}`;
    const keys = {
      nested: `${prefix}:{x}:{${digest}}:queued`, // the prefix `<prefix>:{x}`, not this reaper's
      longer: `${prefix}x:{${digest}}:queued`,
      mine: `${prefix}:{${digest}}:queued`,
      orders: `${queuePrefix}:orders:de:uj:${digest}`,
      orders2: `${queuePrefix}:orders2:de:uj:${digest}`, // a queue this reaper was not told of
      wrongType: `${prefix}:{${'c'.repeat(8)}}:queued`, // a string where a sorted set belongs: its check fails
    };
    for (const key of [keys.nested, keys.longer, keys.mine]) await redis.zadd(key, Date.now() - 1000, 'gone');
    for (const key of [keys.orders, keys.orders2]) await redis.set(key, 'gone-job');
    await redis.set(keys.wrongType, 'not a lock');
    const reaper = new OrphanReaper({
      client: redis,
      prefix,
      options: { grace: 0, queues: [{ name: 'orders', prefix: queuePrefix }], timeBudget: 60_000 },
    });
    try {
      let failedKeys = 0;
      let report;
      do {
        report = await reaper.run();
        failedKeys += report.failedKeys;
      } while (!report.complete);
      const left: Record<string, number> = {};
      for (const [name, key] of Object.entries(keys)) left[name] = await redis.exists(key);
      expect(left).toEqual({ nested: 1, longer: 1, mine: 0, orders: 0, orders2: 1, wrongType: 1 });
      expect(failedKeys).toBe(1); // the run went on past it, and released the others
    } finally {
      await reaper.resign(); // its leadership key, which would outlive the test by 30 s
      for (const key of Object.values(keys)) await redis.del(key);
    }
  });

  it('runs on its interval in one process and reports what it released as `reaped` events', async () => {
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      module: { reaper: { interval: 50, grace: 0 } },
    });
    const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'timer' }));
    const reaped = firstValueFrom(
      a.service.events$.pipe(
        filter((event): event is Extract<UniqueJobEvent, { type: 'reaped' }> => event.type === 'reaped'),
      ),
    );
    await removeUnguarded(a.queue.name, job.id!);
    expect(await reaped).toMatchObject({ kind: 'enqueueLock', jobId: job.id, reason: 'job gone' });
    const onDemand = await reaperOf(a).run();
    expect(reaperOf(a).lastReport).toBe(onDemand);
  });
});

async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setImmediate(resolve));
  }
}
