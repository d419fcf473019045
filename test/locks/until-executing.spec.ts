import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import { startApp, type TestApp, type TestAppOptions } from '../support/app.js';
import { lockKeys, redisClient, uniqueName } from '../support/redis.js';
import { dedupKey, enqueuedJob, gates, queueEvent, takeWithCrashingWorker, type TestJob } from './helpers.js';

const unique: UniqueJobOptions = { lock: 'until_executing', lockArgs: (data: { id: string }) => data.id };

describe('until_executing', () => {
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
    app = await startApp({ queue: uniqueName('ue'), unique, ...options });
    return app;
  }
  const keysOf = (a: TestApp) => lockKeys(redis, a.prefix, a.queue.name);

  it('takes the lock at enqueue: a duplicate while the first is queued is dropped', async () => {
    const a = await start({ paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    const key = dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id: 'u1' })!);
    expect(await keysOf(a)).toEqual([key]);
    expect(await redis.get(key)).toBe(first.id);

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
  });

  it('releases the lock when the job starts: a duplicate while it runs is enqueued (and locked) and runs after it', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      handler: async (job: TestJob) => {
        if (job.data.n === 1) {
          started.resolve();
          await gate.promise;
        }
        return job.data.n;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    expect(await keysOf(a)).toEqual([]);

    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    const key = dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id: 'u1' })!);
    expect(await redis.get(key)).toBe(second.id);
    // One queued job per digest: a third one is a duplicate of the queued second, not of the running first.
    const third = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 });
    expect(third).toMatchObject({ status: 'duplicate', existingJobId: second.id });

    gate.resolve();
    await expect(a.finished(first)).resolves.toBe(1);
    await expect(a.finished(second)).resolves.toBe(2);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, second.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('accepts the same digest again after the job completed', async () => {
    const a = await start();
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await a.finished(first);
    expect(await keysOf(a)).toEqual([]);
    const again = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    expect(again.id).not.toBe(first.id);
    await a.finished(again);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, again.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a failed attempt that will retry takes the lock back: a duplicate is dropped while the job waits for its retry', async () => {
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
    const key = dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id: 'u1' })!);
    await started.promise;
    expect(await keysOf(a)).toEqual([]); // released at start

    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    expect(await keysOf(a)).toEqual([key]);
    expect(await redis.get(key)).toBe(first.id);
    const duplicate = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 });
    expect(duplicate).toMatchObject({ status: 'duplicate', existingJobId: first.id });

    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe('retried');
    expect(a.runs.map((job) => job.id)).toEqual([first.id, first.id]);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
  });

  it('a retrying job does not take the lock from a duplicate enqueued while its attempt ran', async () => {
    const gate = hold();
    const started = hold();
    const duplicateRunning = hold();
    const releaseDuplicate = hold();
    const a = await start({
      handler: async (job: TestJob) => {
        if (job.data.n === 1 && job.attemptsMade === 0) {
          started.resolve();
          await gate.promise;
          throw new Error('transient');
        }
        if (job.data.n === 2) {
          duplicateRunning.resolve();
          await releaseDuplicate.promise;
        }
        return job.data.n;
      },
    });
    const first = enqueuedJob(
      await a.service.enqueue(
        a.queue,
        'sync',
        { id: 'u1', n: 1 },
        { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      ),
    );
    await started.promise;
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    await duplicateRunning.promise;
    // The second job released its own lock when it started; the failed first did not overwrite it on retry.
    expect(await keysOf(a)).toEqual([]);
    releaseDuplicate.resolve();
    await a.finished(second);
    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe(1);
    expect(await keysOf(a)).toEqual([]);
  });

  it('after the final failure the lock is gone and the digest is accepted again', async () => {
    const a = await start({
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
  });

  it('a job taken by a crashed worker keeps its lock until the stalled-job recovery runs it', async () => {
    const a = await start({ paused: true, worker: { stalledInterval: 300 } });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const key = dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id: 'u1' })!);
    const crashed = await takeWithCrashingWorker(a.queue.name);
    cleanups.push(crashed.close);
    expect(crashed.job.id).toBe(first.id);
    expect(await a.queue.getJobState(first.id!)).toBe('active');
    // The crashed worker never ran the handler, so the lock was never released.
    expect(await redis.get(key)).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });

    const stalled = queueEvent(a.queueEvents, 'stalled', first.id!);
    a.start();
    await stalled;
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
  });

  it('a delayed job holds the lock from enqueue until it starts', async () => {
    const a = await start();
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 400 }));
    const key = dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id: 'u1' })!);
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    expect(await keysOf(a)).toEqual([key]);
    expect(await redis.pttl(key)).toBe(-1); // no lockTtl: lives as long as the job
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('with lockTtl, the lock of a delayed job lives lockTtl past its run time', async () => {
    const a = await start({ unique: { ...unique, lockTtl: 5_000 }, paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 10_000 }));
    const key = dedupKey(a.queue.name, a.service.digestOf(a.queue.name, 'sync', { id: 'u1' })!);
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(13_000);
    expect(ttl).toBeLessThanOrEqual(15_000);
    await first.remove();
    expect(await keysOf(a)).toEqual([]);
  });
});
