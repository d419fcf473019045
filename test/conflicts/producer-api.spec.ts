import { describe, expect, it } from '@jest/globals';
import { DuplicateJobError, UniqueJobsError, UnserializableLockArgsError } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { Gates } from '../support/gates.js';
import { asDuplicate, asEnqueued, byId, dedupHolder, dedupKey } from '../support/locks.js';
import { clientSide, runData, serverSide } from './helpers.js';

type Data = { id: string; n?: number; tag?: string };

const ZERO_COUNTS = { waiting: 0, delayed: 0, active: 0, prioritized: 0, completed: 0, failed: 0 };
const countsOf = (app: TestApp) =>
  app.queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'completed', 'failed');

describe('producer paths through a guarded queue', () => {
  const { redis, start, keysOf } = useApps('prod');

  describe('addBulk', () => {
    const bulk = () => [
      { name: 'sync', data: { id: 'a', n: 1 } }, // duplicate of the job already queued
      { name: 'sync', data: { id: 'b', n: 1 } },
      { name: 'sync', data: { id: 'c', n: 1 } },
      { name: 'sync', data: { id: 'b', n: 2 } }, // duplicate inside the same bulk
      { name: 'sync', data: { id: 'd', n: 1 } },
    ];

    it('queue.addBulk: mixed new and duplicate digests give exactly one job per digest', async () => {
      const app = await start(clientSide('log'));
      const existing = await app.queue.add('sync', { id: 'a', n: 0 });
      const jobs = await app.queue.addBulk(bulk());

      expect(jobs).toHaveLength(5);
      // A duplicate's handle: the holder's id, the entry's own data (built locally, as BullMQ's deduplication does).
      expect(jobs[0].id).toBe(existing.id);
      expect(jobs[0].data).toEqual({ id: 'a', n: 1 });
      expect(jobs[3].id).toBe(jobs[1].id);
      expect(jobs[3].data).toEqual({ id: 'b', n: 2 });
      expect(new Set(jobs.map((job) => job.id)).size).toBe(4);

      const waiting = await app.queue.getJobs(['waiting']);
      expect(waiting.map((job) => job.data as Data).sort((x, y) => x.id.localeCompare(y.id))).toEqual([
        { id: 'a', n: 0 },
        { id: 'b', n: 1 },
        { id: 'c', n: 1 },
        { id: 'd', n: 1 },
      ]);
      for (const id of ['a', 'b', 'c', 'd']) {
        const digest = app.service.digestOf(app.queue.name, 'sync', { id })!;
        expect(await dedupHolder(redis, app.queue.name, digest)).toBe(
          waiting.find((job) => (job.data as Data).id === id)!.id,
        );
      }

      app.start();
      await Promise.all(waiting.map((job) => app.finished(job)));
      expect(app.runs).toHaveLength(4);
      expect(await keysOf(app)).toEqual([]);
    });

    it('service.enqueueBulk returns a result per entry', async () => {
      const app = await start(clientSide('raise'));
      const existing = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 0 }));
      const results = await app.service.enqueueBulk(app.queue, bulk());

      expect(results.map((result) => result.status)).toEqual([
        'duplicate',
        'enqueued',
        'enqueued',
        'duplicate',
        'enqueued',
      ]);
      expect(asDuplicate(results[0])).toMatchObject({
        strategy: 'raise',
        existingJobId: existing.job.id,
        digest: existing.digest,
      });
      const b = asEnqueued(results[1]);
      expect(b.job.data).toEqual({ id: 'b', n: 1 });
      expect(b.digest).toBe(app.service.digestOf(app.queue.name, 'sync', { id: 'b' }));
      expect(asDuplicate(results[3])).toMatchObject({ existingJobId: b.job.id, digest: b.digest });
      expect(asEnqueued(results[4]).job.data).toEqual({ id: 'd', n: 1 });
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 4 });
    });

    it('queue.addBulk with raise throws the first DuplicateJobError after enqueueing the new digests', async () => {
      const app = await start(clientSide('raise'));
      const existing = await app.queue.add('sync', { id: 'a', n: 0 });
      const error = await app.queue.addBulk(bulk()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(DuplicateJobError);
      expect((error as DuplicateJobError).existingJobId).toBe(existing.id);
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 4 });
    });

    it('a semaphore-path job (lockLimit 2) in a bulk admits two per digest', async () => {
      const app = await start(clientSide('log', { lockLimit: 2 }));
      const results = await app.service.enqueueBulk(app.queue, [
        { name: 'sync', data: { id: 'a', n: 1 } },
        { name: 'sync', data: { id: 'a', n: 2 } },
        { name: 'sync', data: { id: 'a', n: 3 } },
        { name: 'sync', data: { id: 'b', n: 1 } },
      ]);
      expect(results.map((result) => result.status)).toEqual(['enqueued', 'enqueued', 'duplicate', 'enqueued']);
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 3 });
    });
  });

  describe('delayed jobs', () => {
    it('queue.add with delay takes the lock at enqueue', async () => {
      const app = await start({
        unique: { lock: 'until_executed', onConflict: 'log', lockArgs: byId },
      });
      const delayed = await app.queue.add('sync', { id: 'a', n: 1 }, { delay: 60_000 });
      expect(await app.queue.getJobState(delayed.id!)).toBe('delayed');
      const digest = app.service.digestOf(app.queue.name, 'sync', { id: 'a' })!;
      expect(await dedupHolder(redis, app.queue.name, digest)).toBe(delayed.id);

      const dup = await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 2 });
      expect(dup).toMatchObject({ status: 'duplicate', existingJobId: delayed.id });
      expect((await app.queue.add('sync', { id: 'a', n: 3 })).id).toBe(delayed.id);
      expect(await app.queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 1 });
    });

    it('a lockTtl is counted from the run time: the lock lives lockTtl + delay', async () => {
      const app = await start({
        unique: { lock: 'until_executed', lockTtl: 5_000, onConflict: 'log', lockArgs: byId },
        paused: true,
      });
      const delayed = await app.queue.add('sync', { id: 'a' }, { delay: 60_000 });
      const digest = app.service.digestOf(app.queue.name, 'sync', { id: 'a' })!;
      expect(await dedupHolder(redis, app.queue.name, digest)).toBe(delayed.id);
      const ttl = await redis.pttl(dedupKey(app.queue.name, digest));
      expect(ttl).toBeGreaterThan(60_000);
      expect(ttl).toBeLessThanOrEqual(65_000);
    });

    it('a delayed job on the semaphore path (lockLimit 2) holds its slot', async () => {
      const app = await start(clientSide('log', { lockLimit: 2 }));
      const one = await app.queue.add('sync', { id: 'a', n: 1 }, { delay: 60_000 });
      const two = await app.queue.add('sync', { id: 'a', n: 2 }, { delay: 60_000 });
      const digest = app.service.digestOf(app.queue.name, 'sync', { id: 'a' })!;
      expect((await redis.zrange(`${app.prefix}:{${digest}}:queued`, '0', '-1')).sort()).toEqual(
        [one.id, two.id].sort(),
      );
      expect([one.id, two.id]).toContain(
        asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 3 })).existingJobId,
      );
      expect(await app.queue.getJobCounts('delayed')).toEqual({ delayed: 2 });
    });
  });

  describe("BullMQ's own deduplication option on a unique job", () => {
    it('queue.add throws a clear error and enqueues nothing', async () => {
      const app = await start({
        unique: { lock: 'until_executed', lockArgs: byId },
        paused: true,
      });
      const add = app.queue.add('sync', { id: 'a' }, { deduplication: { id: 'mine' } });
      await expect(add).rejects.toBeInstanceOf(UniqueJobsError);
      await expect(app.queue.add('sync', { id: 'a' }, { deduplication: { id: 'mine' } })).rejects.toThrow(
        /"deduplication" option/,
      );
      await expect(
        app.service.enqueue(app.queue, 'sync', { id: 'a' }, { deduplication: { id: 'mine', ttl: 100 } }),
      ).rejects.toThrow(/deduplication/);
      await expect(
        app.queue.addBulk([
          { name: 'sync', data: { id: 'b' } },
          { name: 'sync', data: { id: 'a' }, opts: { deduplication: { id: 'mine' } } },
        ]),
      ).rejects.toThrow(/deduplication/);
      expect(await countsOf(app)).toEqual(ZERO_COUNTS);
      expect(await keysOf(app)).toEqual([]);
    });

    it('a job name that is not unique keeps BullMQ deduplication working as usual', async () => {
      const app = await start({
        unique: { lock: 'until_executed', lockArgs: byId, jobName: 'unique-one' },
        paused: true,
      });
      const first = await app.queue.add('plain', { id: 'a' }, { deduplication: { id: 'mine' } });
      const second = await app.queue.add('plain', { id: 'b' }, { deduplication: { id: 'mine' } });
      expect(second.id).toBe(first.id);
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    });
  });

  describe('unserializable lock arguments', () => {
    const circular: Record<string, unknown> = { a: 1 };
    circular.self = circular;
    const cases: [string, unknown][] = [
      ['a function', () => 1],
      ['a BigInt', 10n],
      ['a circular object', circular],
      ['undefined', undefined],
      ['a nested function', { amount: 1, fn: [() => 1] }],
    ];

    it.each(cases)(
      'lockArgs returning %s: queue.add rejects, nothing is enqueued, no lock key',
      async (_, lockArgs) => {
        const app = await start({
          unique: { lock: 'until_executed', lockArgs: () => lockArgs },
          paused: true,
        });
        await expect(app.queue.add('sync', { id: 'a' })).rejects.toBeInstanceOf(UnserializableLockArgsError);
        await expect(app.service.enqueue(app.queue, 'sync', { id: 'a' })).rejects.toBeInstanceOf(
          UnserializableLockArgsError,
        );
        expect(await countsOf(app)).toEqual(ZERO_COUNTS);
        expect(await keysOf(app)).toEqual([]);
      },
    );

    it('one bad entry in addBulk enqueues none of the bulk', async () => {
      const app = await start({
        unique: { lock: 'until_executed', lockArgs: (data: { v: unknown }) => data.v },
        paused: true,
      });
      await expect(
        app.queue.addBulk([
          { name: 'sync', data: { v: 1 } },
          { name: 'sync', data: { v: undefined } },
          { name: 'sync', data: { v: 3 } },
        ]),
      ).rejects.toBeInstanceOf(UnserializableLockArgsError);
      expect(await countsOf(app)).toEqual(ZERO_COUNTS);
      expect(await keysOf(app)).toEqual([]);
    });

    it('the error names where the bad value is, and the job', async () => {
      const app = await start({
        unique: { lock: 'while_executing', lockArgs: (data: Data) => ({ id: data.id, when: data.n }) },
        paused: true,
      });
      const error = await app.queue.add('sync', { id: 'a', n: Number.NaN }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(UnserializableLockArgsError);
      expect((error as UnserializableLockArgsError).path).toBe('$.when');
      expect((error as UnserializableLockArgsError).job).toEqual({ queue: app.queue.name, name: 'sync' });
      // It names where the arguments come from (the option), not only the job.
      expect((error as Error).message).toContain(
        `of job "sync" on queue "${app.queue.name}" (what its definition's lockArgs returned, or its data when it has no lockArgs) cannot be hashed`,
      );
      expect((error as Error).message).toContain(`of job "sync" on queue "${app.queue.name}"`);
      expect(await countsOf(app)).toEqual(ZERO_COUNTS);
    });
  });

  describe('enabled: false', () => {
    it('no locks at all: duplicates are enqueued and run', async () => {
      const app = await start({
        ...clientSide('raise'),
        module: { enabled: false },
      });
      const one = await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 1 });
      const two = await app.queue.add('sync', { id: 'a', n: 2 });
      const bulk = await app.queue.addBulk([{ name: 'sync', data: { id: 'a', n: 3 } }]);
      expect(one.status).toBe('enqueued');
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 3 });
      expect(await keysOf(app)).toEqual([]);
      app.start();
      await Promise.all([asEnqueued(one).job, two, bulk[0]].map((job) => app.finished(job)));
      expect(
        runData<Data>(app)
          .map((data) => data.n)
          .sort(),
      ).toEqual([1, 2, 3]);
      expect(await keysOf(app)).toEqual([]);
    });

    it('no run-time lock either: two jobs with one digest run at the same time', async () => {
      const gates = new Gates().hold('x', 'y');
      const app = await start({
        ...serverSide('reject', gates),
        module: { enabled: false },
      });
      const x = await app.queue.add('sync', { id: 'a', tag: 'x' });
      const y = await app.queue.add('sync', { id: 'a', tag: 'y' });
      await Promise.all([gates.started('x'), gates.started('y')]);
      expect(await keysOf(app)).toEqual([]);
      gates.releaseAll();
      await expect(app.finished(x)).resolves.toBe('ran:x');
      await expect(app.finished(y)).resolves.toBe('ran:y');
      expect(await app.service.deadSet.size()).toBe(0);
    });
  });
});
