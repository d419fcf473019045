// Scenarios that several lock types go through alike: one table row a lock type. What is particular to a lock type
// stays in its own file.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { byId, dedupKey, digestOf, enqueuedJob, runningKey } from '../support/locks.js';
import { queueEvent, waitFor } from '../support/wait.js';
import type { TestJob } from './helpers.js';

type LockType = UniqueJobOptions['lock'];
/** A lock of job `sync` with lock argument `u1`: BullMQ's deduplication key (enqueue) or the run-time key. */
type Held = 'enqueue' | 'runtime';

describe('every lock type', () => {
  const { redis, start, keysOf } = useApps('lock');

  const enqueueKey = (a: TestApp) => dedupKey(a.queue.name, digestOf(a, 'sync', { id: 'u1' }));
  const runtimeKey = (a: TestApp) => runningKey(a.prefix, digestOf(a, 'sync', { id: 'u1' }));
  /** The keys `held` names, in the order `keysOf` lists them (the library's own keys first). */
  const keysNamed = (a: TestApp, held: Held[]) => held.map((h) => (h === 'enqueue' ? enqueueKey(a) : runtimeKey(a)));

  it.each<LockType>(['until_executed', 'until_executing', 'until_and_while_executing'])(
    '%s takes the enqueue lock at enqueue: a duplicate while the first is queued is dropped, another digest is not',
    async (lock) => {
      const a = await start({ unique: { lock, lockArgs: byId }, paused: true });
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
      expect(await keysOf(a)).toEqual([enqueueKey(a)]);
      expect(await redis.get(enqueueKey(a))).toBe(first.id);

      const second = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 });
      expect(second).toMatchObject({ status: 'duplicate', strategy: 'log', existingJobId: first.id });
      expect(await a.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });

      // Another digest is not blocked.
      const other = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u2' }));

      a.start();
      await a.finished(first);
      await a.finished(other);
      expect(a.runs.map((job) => job.id)).toEqual([first.id, other.id]);
      expect(await keysOf(a)).toEqual([]);
    },
  );

  it.each<LockType>(['until_executed', 'until_executing', 'while_executing', 'until_and_while_executing'])(
    '%s accepts (and runs) the same digest again after the job completed',
    async (lock) => {
      const a = await start({ unique: { lock, lockArgs: byId } });
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
      await a.finished(first);
      expect(await keysOf(a)).toEqual([]);
      const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
      expect(again.id).not.toBe(first.id);
      await a.finished(again);
      expect(a.runs.map((job) => job.id)).toEqual([first.id, again.id]);
      expect(await keysOf(a)).toEqual([]);
    },
  );

  it.each<[LockType, number | undefined]>([
    ['until_executed', undefined],
    ['until_executed', 60_000],
    ['until_executing', undefined],
    ['while_executing', undefined],
    ['until_and_while_executing', undefined],
  ])(
    '%s (lockTtl %s): after the final failure every lock is gone and the digest is accepted again',
    async (lock, lockTtl) => {
      const a = await start({
        unique: { lock, lockArgs: byId, lockTtl },
        handler: async (job: TestJob) => {
          if (job.data.fail) throw new Error('always');
          return 'ok';
        },
      });
      const failing = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', fail: true }, { attempts: 2 }));
      await expect(a.finished(failing)).rejects.toThrow('always');
      expect(await a.queue.getJobState(failing.id!)).toBe('failed');
      expect(a.runs.map((job) => job.id)).toEqual([failing.id, failing.id]);
      expect(await keysOf(a)).toEqual([]);

      const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', fail: false }));
      await expect(a.finished(again)).resolves.toBe('ok');
      expect(await keysOf(a)).toEqual([]);
    },
  );

  it.each<[LockType, Held[]]>([
    ['until_executed', ['enqueue']],
    ['until_executing', []],
    ['until_and_while_executing', ['runtime']],
  ])(
    '%s: while an attempt runs it holds %j; once it failed and will retry, the enqueue lock (alone) drops duplicates',
    async (lock, whileRunning) => {
      const gate = hold();
      const started = hold();
      const a = await start({
        unique: { lock, lockArgs: byId },
        handler: async (job: TestJob) => {
          if (job.attemptsMade === 0) {
            started.resolve();
            await gate.promise;
            throw new Error('transient');
          }
          return 'retried';
        },
      });
      const first = enqueuedJob(
        await a.service.enqueue(
          a.queue,
          'sync',
          { id: 'u1' },
          { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
        ),
      );
      await started.promise;
      expect(await keysOf(a)).toEqual(keysNamed(a, whileRunning));

      const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
      gate.resolve();
      await delayed;
      expect(await a.queue.getJobState(first.id!)).toBe('delayed');
      expect(await keysOf(a)).toEqual([enqueueKey(a)]);
      expect(await redis.get(enqueueKey(a))).toBe(first.id);
      expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
        status: 'duplicate',
        existingJobId: first.id,
      });

      await (await a.queue.getJob(first.id!))!.promote();
      await expect(a.finished(first)).resolves.toBe('retried');
      expect(a.runs.map((job) => job.id)).toEqual([first.id, first.id]);
      expect(await keysOf(a)).toEqual([]);
      enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
    },
  );

  it.each<[LockType, Held[]]>([
    ['until_executed', ['enqueue']],
    ['until_executing', []],
    ['until_and_while_executing', ['runtime']],
  ])(
    '%s: a delayed job holds the enqueue lock (no TTL without lockTtl) from enqueue; while it runs it holds %j',
    async (lock, whileRunning) => {
      const running = hold();
      const gate = hold();
      // The worker starts after the checks on the delayed job: a loaded machine may take longer than the delay.
      const a = await start({
        unique: { lock, lockArgs: byId },
        paused: true,
        handler: async () => {
          running.resolve();
          await gate.promise;
        },
      });
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 400 }));
      expect(await a.queue.getJobState(first.id!)).toBe('delayed');
      expect(await keysOf(a)).toEqual([enqueueKey(a)]);
      expect(await redis.pttl(enqueueKey(a))).toBe(-1); // no lockTtl: lives as long as the job
      expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
        status: 'duplicate',
        existingJobId: first.id,
      });
      a.start();
      await running.promise;
      expect(await keysOf(a)).toEqual(keysNamed(a, whileRunning));
      gate.resolve();
      await a.finished(first);
      expect(a.runs.map((job) => job.id)).toEqual([first.id]);
      expect(await keysOf(a)).toEqual([]);
    },
  );

  it.each<[LockType, number | undefined, Held[]]>([
    ['until_executed', undefined, []],
    ['until_executed', 60_000, []],
  ])(
    '%s (lockTtl %s) keeps the enqueue lock while the job runs: a duplicate is dropped; after completion it holds %j',
    async (lock, lockTtl, afterCompletion) => {
      const gate = hold();
      const started = hold();
      const a = await start({
        unique: { lock, lockArgs: byId, lockTtl },
        handler: async () => {
          started.resolve();
          await gate.promise;
          return 'done';
        },
      });
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
      await started.promise;
      expect(await redis.get(enqueueKey(a))).toBe(first.id);
      expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
        status: 'duplicate',
        existingJobId: first.id,
      });
      gate.resolve();
      await expect(a.finished(first)).resolves.toBe('done');
      expect(a.runs).toHaveLength(1);
      expect(await keysOf(a)).toEqual(keysNamed(a, afterCompletion));
    },
  );

  it.each<[LockType, boolean]>([
    ['while_executing', false],
    ['until_and_while_executing', true],
  ])(
    '%s with lockTimeout > 0: a duplicate waits for the running holder and then runs (keeps an enqueue lock: %s)',
    async (lock, keepsEnqueueLock) => {
      const gate = hold();
      const started = hold();
      const order: string[] = [];
      const a = await start({
        unique: { lock, lockArgs: byId, lockTimeout: 20_000 },
        worker: { concurrency: 2 },
        handler: async (job: TestJob) => {
          order.push(`start ${job.data.n}`);
          if (job.data.n === 1) {
            started.resolve();
            await gate.promise;
          }
          order.push(`end ${job.data.n}`);
          return job.data.n;
        },
      });
      const events = new EventLog(a);
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
      await started.promise;
      const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
      await waitFor('the duplicate to be taken', async () => (await a.queue.getJobState(second.id!)) === 'active');
      expect(a.runs.map((job) => job.id)).toEqual([first.id]); // active, but waiting for the run-time lock
      // As far as enqueue goes it is still queued: it keeps the enqueue lock of its lock type, if any.
      expect(await redis.get(enqueueKey(a))).toBe(keepsEnqueueLock ? second.id : null);
      gate.resolve();
      await expect(a.finished(second)).resolves.toBe(2);
      await expect(a.finished(first)).resolves.toBe(1);
      expect(order).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
      expect(events.duplicates('server')).toEqual([]);
      expect(await keysOf(a)).toEqual([]);
    },
  );
});
