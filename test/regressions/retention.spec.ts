// BullMQ's own retention (`removeOnComplete` / `removeOnFail` as `true`, a number, `{ age, count }`, and `keepLogs`)
// against every lock type on both enqueue-lock paths: a job BullMQ removes as it ends (or an older one it removes by
// count) leaves no lock and no idempotency claim behind, and a later enqueue of the same digest is enqueued and runs
// (but within an `until_expired` period, which outlives its job by design: docs/how-locks-move.md).
import { describe, expect, it } from '@jest/globals';
import type { Job, JobsOptions } from 'bullmq';
import type { LockType, UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { byId, enqueuedJob } from '../support/locks.js';
import { takeWithCrashingWorker } from '../locks/helpers.js';
import { scanKeys } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

const LOCKS: LockType[] = ['until_executing', 'until_executed', 'until_and_while_executing', 'while_executing'];

const PATHS: [string, Partial<UniqueJobOptions>][] = [
  ['fast path', {}],
  ['fast path with lockTtl', { lockTtl: 60_000 }],
  ['slot set (lockLimit 2)', { lockLimit: 2 }],
  ['slot set (uniqueAcross queues)', { uniqueAcross: 'queues' }],
];

const RETENTION: [string, JobsOptions][] = [
  ['true', { removeOnComplete: true, removeOnFail: true }],
  ['0', { removeOnComplete: 0, removeOnFail: 0 }],
  ['1 (count)', { removeOnComplete: 1, removeOnFail: 1, keepLogs: 1 }],
  ['{ age: 0, count: 0 }', { removeOnComplete: { age: 0, count: 0 }, removeOnFail: { age: 0, count: 0 } }],
  ['{ age: 3600, count: 1 }', { removeOnComplete: { age: 3600, count: 1 }, removeOnFail: { age: 3600, count: 1 } }],
];

type Outcome = 'completes' | 'fails (attempts 1)' | 'fails once, then completes (attempts 2)';
const OUTCOMES: Outcome[] = ['completes', 'fails (attempts 1)', 'fails once, then completes (attempts 2)'];

/** The data of these jobs: `id` is the lock argument, `fail` how many attempts throw. */
type Data = { id: string; n: number; fail: number };

describe("BullMQ's retention options and the locks", () => {
  const { redis, start, keysOf, onCleanup } = useApps('ret');

  describe.each(LOCKS)('%s', (lock) => {
    // A run-time lock alone has no enqueue lock, so no lockTtl.
    const paths = lock === 'while_executing' ? PATHS.filter(([, path]) => path.lockTtl === undefined) : PATHS;
    describe.each(paths)('%s', (_pathLabel, path) => {
      it.each(
        RETENTION.flatMap(([label, opts]) =>
          OUTCOMES.map((outcome) => [`retention ${label}, a job that ${outcome}`, opts, outcome] as const),
        ),
      )('%s: nothing stays locked, the digest is enqueued again', async (_title, retention, outcome) => {
        const a = await start({
          unique: { lock, lockArgs: byId, ...path },
          handler: async (job: Job) => {
            const data = job.data as Data;
            await job.log(`attempt ${job.attemptsMade + 1}`);
            if (job.attemptsMade < data.fail) throw new Error(`boom ${data.n}`);
            return data.n;
          },
        });
        const fail = outcome === 'completes' ? 0 : 1;
        const attempts = outcome === 'fails once, then completes (attempts 2)' ? 2 : 1;
        const opts: JobsOptions = { ...retention, attempts };
        const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1, fail }, opts));
        const settled = a.finished(first).then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
        expect(await settled).toEqual(fail === 1 && attempts === 1 ? { error: expect.anything() } : { value: 1 });
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
        // An older job of the queue is removed by count when this one ends (retention 1): it held nothing any more.
        const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2, fail: 0 }, opts));
        await expect(a.finished(second)).resolves.toBe(2);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
        const third = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3, fail: 0 }));
        await expect(a.finished(third)).resolves.toBe(3);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
      });

      it('removeOnFail: a job BullMQ fails for stalling (never reaching the processor) leaves nothing locked', async () => {
        const a = await start({
          unique: { lock, lockArgs: byId, ...path },
          worker: { maxStalledCount: 0, stalledInterval: 300 },
          paused: true,
          handler: async (job: Job) => (job.data as Data).n,
        });
        const first = enqueuedJob(
          await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1, fail: 0 }, { removeOnFail: true }),
        );
        const crashed = await takeWithCrashingWorker(a.queue.name);
        onCleanup(() => crashed.close());
        const failed = new Promise<void>((resolve) => {
          a.worker!.on('failed', (job) => job?.id === first.id && resolve());
        });
        a.start();
        await failed;
        await waitFor('the dead job to be removed', async () => (await a.queue.getJob(first.id!)) === undefined);
        await waitFor('every lock to be released', async () => (await keysOf(a)).length === 0);
        const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2, fail: 0 }));
        await expect(a.finished(again)).resolves.toBe(2);
        expect(a.runs).toHaveLength(1);
      });
    });
  });

  describe.each(['release', 'keep'] as const)('@IdempotencyKey, onFailure %s, with until_executed', (onFailure) => {
    it.each(RETENTION.filter(([label]) => label === 'true' || label.startsWith('{ age: 3600')))(
      'retention %s: a job removed as it ends leaves no claim, only the record its onFailure promises',
      async (_label, retention) => {
        const a = await start({
          unique: { lock: 'until_executed', lockArgs: byId },
          idempotency: { key: (job) => (job.data as { key: string }).key, onFailure, fingerprint: false },
          handler: async (job: Job) => {
            const data = job.data as Data & { key: string };
            if (data.fail > 0) throw new Error(`boom ${data.n}`);
            return data.n;
          },
        });
        const records = () => scanKeys(redis, `${a.prefix}:*:idempotency`);
        // The lock keys, without the idempotency records (under the same prefix).
        const locksOf = async (app: TestApp) => (await keysOf(app)).filter((key) => !key.endsWith(':idempotency'));
        const opts: JobsOptions = { ...retention, attempts: 1 };
        // Completed and removed: the record is done, a later job of the key replays it without running.
        const done = enqueuedJob(
          await a.service.enqueue(a.queue, 'sync', { id: 'u1', key: 'k1', n: 1, fail: 0 }, opts),
        );
        await expect(a.finished(done)).resolves.toBe(1);
        // With `true`, BullMQ removes it as it ends; a count of 1 keeps it (the newest), and removes it with the next.
        const removesAtOnce = retention.removeOnComplete === true;
        if (removesAtOnce) expect(await a.queue.getJob(done.id!)).toBeUndefined();
        await waitFor('every lock to be released', async () => (await locksOf(a)).length === 0);
        const replay = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u2', key: 'k1', n: 2, fail: 0 }));
        await expect(a.finished(replay)).resolves.toBe(1);
        // Failed for good and removed: no claim left in progress; the key runs again (release) or replays the failure.
        const failing = { id: 'u3', key: 'k2', n: 3, fail: 1 };
        const failed = enqueuedJob(await a.service.enqueue(a.queue, 'sync', failing, opts));
        await expect(a.finished(failed)).rejects.toThrow('boom 3');
        if (removesAtOnce) expect(await a.queue.getJob(failed.id!)).toBeUndefined();
        await waitFor('every lock to be released', async () => (await locksOf(a)).length === 0);
        expect(await records()).toHaveLength(onFailure === 'keep' ? 2 : 1);
        const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u3', key: 'k2', n: 4, fail: 0 }));
        if (onFailure === 'release') await expect(a.finished(again)).resolves.toBe(4);
        else await expect(a.finished(again)).rejects.toThrow(/boom 3|IdempotencyKeyFailed/);
        expect(a.runs.map((run) => (run.data as Data).n)).toEqual(onFailure === 'release' ? [1, 3, 4] : [1, 3]);
        await waitFor('every lock to be released', async () => (await locksOf(a)).length === 0);
      },
    );
  });

  it.each(OUTCOMES)(
    'until_expired, removeOnComplete/removeOnFail true, a job that %s: the period outlives the job, then ends',
    async (outcome) => {
      const a = await start({
        unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 1_500 },
        handler: async (job: Job) => {
          const data = job.data as Data;
          if (job.attemptsMade < data.fail) throw new Error('boom');
          return data.n;
        },
      });
      const fail = outcome === 'completes' ? 0 : 1;
      const attempts = outcome === 'fails once, then completes (attempts 2)' ? 2 : 1;
      const opts: JobsOptions = { removeOnComplete: true, removeOnFail: true, attempts };
      const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1, fail }, opts));
      await a.finished(first).catch(() => undefined);
      await waitFor('the job to be removed', async () => (await a.queue.getJob(first.id!)) === undefined);
      // Within the period: a duplicate of the removed job.
      await expect(a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2, fail: 0 })).resolves.toMatchObject({
        status: 'duplicate',
        existingJobId: first.id,
      });
      // The period ends with its TTL (time-based: polled).
      await waitFor('the period to end', async () => (await keysOf(a)).length === 0, 10_000);
      const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3, fail: 0 }));
      await expect(a.finished(again)).resolves.toBe(3);
    },
  );
});
