import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import { startApp, type TestApp, type TestAppOptions } from '../support/app.js';
import { lockKeys, redisClient, uniqueName } from '../support/redis.js';
import { dedupKey, enqueuedJob, gates, queueEvent, takeWithCrashingWorker, type TestJob } from './helpers.js';

const unique: UniqueJobOptions = { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id };

describe('until_executed', () => {
  let app: TestApp | undefined;
  const cleanups: (() => Promise<void>)[] = [];
  const redis = redisClient();
  const { hold, openAll } = gates();
  afterEach(async () => {
    openAll();
    for (const cleanup of cleanups.splice(0)) await cleanup();
    await app?.close();
    app = undefined;
  });
  afterAll(async () => redis.quit());

  async function start(options: Omit<TestAppOptions, 'queue'> = {}): Promise<TestApp> {
    app = await startApp({ queue: uniqueName('ued'), unique, ...options });
    return app;
  }
  const keysOf = (a: TestApp) => lockKeys(redis, a.prefix, a.queue.name);
  const keyOf = (a: TestApp, id: string) => dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id })!);

  it('takes the lock at enqueue: a duplicate while the first is queued is dropped', async () => {
    const a = await start({ paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    expect(await keysOf(a)).toEqual([keyOf(a, 'u1')]);
    expect(await redis.get(keyOf(a, 'u1'))).toBe(first.id);
    const second = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 });
    expect(second).toMatchObject({ status: 'duplicate', strategy: 'log', existingJobId: first.id });
    expect(await a.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });

    a.start();
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('keeps the lock while the job runs: a duplicate while it runs is dropped', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      handler: async () => {
        started.resolve();
        await gate.promise;
        return 'done';
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await started.promise;
    expect(await redis.get(keyOf(a, 'u1'))).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    gate.resolve();
    await expect(a.finished(first)).resolves.toBe('done');
    expect(a.runs).toHaveLength(1);
    expect(await keysOf(a)).toEqual([]);
  });

  it('accepts the same digest again after the job completed', async () => {
    const a = await start();
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await a.finished(first);
    expect(await keysOf(a)).toEqual([]);
    const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await a.finished(again);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, again.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('with lockTtl, the lock (which BullMQ does not delete itself) is still released when the job completes', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      unique: { ...unique, lockTtl: 60_000 },
      handler: async () => {
        started.resolve();
        await gate.promise;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await started.promise;
    expect(await redis.pttl(keyOf(a, 'u1'))).toBeGreaterThan(50_000);
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1' })).status).toBe('duplicate');
    gate.resolve();
    await a.finished(first);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
  });

  it('keeps the lock while a failed job waits for its retry: a duplicate is dropped until it completes', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
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
    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    expect(await keysOf(a)).toEqual([keyOf(a, 'u1')]);
    expect(await redis.get(keyOf(a, 'u1'))).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });

    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe('retried');
    expect(a.runs.map((job) => job.id)).toEqual([first.id, first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it.each([
    ['without lockTtl', undefined],
    ['with lockTtl', 60_000],
  ])('releases the lock when the job finally fails (%s)', async (_label, lockTtl) => {
    const a = await start({
      unique: { ...unique, lockTtl },
      handler: async (job: TestJob) => {
        if (job.data.fail) throw new Error('always');
        return 'ok';
      },
    });
    const failing = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', fail: true }, { attempts: 2 }));
    await expect(a.finished(failing)).rejects.toThrow('always');
    expect(a.runs.map((job) => job.id)).toEqual([failing.id, failing.id]);
    expect(await keysOf(a)).toEqual([]);

    const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', fail: false }));
    await expect(a.finished(again)).resolves.toBe('ok');
    expect(await keysOf(a)).toEqual([]);
  });

  it('a job taken by a crashed worker keeps its lock through the stalled-job recovery, and runs once more', async () => {
    const gate = hold();
    const running = hold();
    const a = await start({
      paused: true,
      worker: { stalledInterval: 300 },
      handler: async () => {
        running.resolve();
        await gate.promise;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const crashed = await takeWithCrashingWorker(a.queue.name);
    cleanups.push(crashed.close);
    expect(crashed.job.id).toBe(first.id);
    expect(await redis.get(keyOf(a, 'u1'))).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });

    const stalled = queueEvent(a.queueEvents, 'stalled', first.id!);
    a.start();
    await stalled;
    await running.promise;
    // The recovered run (same job id) still holds the lock while it runs.
    expect(await redis.get(keyOf(a, 'u1'))).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    gate.resolve();
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 4 }));
  });

  it('a delayed job holds the lock from enqueue until it completes', async () => {
    const a = await start();
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 400 }));
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    expect(await keysOf(a)).toEqual([keyOf(a, 'u1')]);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });
});
