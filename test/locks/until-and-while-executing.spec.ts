import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import type { UniqueJobEvent, UniqueJobOptions } from '../../lib/index.js';
import { startApp, type TestApp, type TestAppOptions } from '../support/app.js';
import { lockKeys, redisClient, uniqueName } from '../support/redis.js';
import {
  dedupKey,
  digestOf,
  enqueuedJob,
  gates,
  libraryEvent,
  owners,
  queueEvent,
  recordEvents,
  runningKey,
  takeWithCrashingWorker,
  waitFor,
  type TestJob,
} from './helpers.js';

const unique: UniqueJobOptions = { lock: 'until_and_while_executing', lockArgs: (data: { id: string }) => data.id };

describe('until_and_while_executing', () => {
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
    app = await startApp({ queue: uniqueName('uawe'), unique, ...options });
    return app;
  }
  const keysOf = (a: TestApp) => lockKeys(redis, a.prefix, a.queue.name);
  const enqueueKey = (a: TestApp, id: string) => dedupKey(a.queue.name, digestOf(a, 'sync', { id }));
  const runtimeKey = (a: TestApp, id: string) => runningKey(a.prefix, digestOf(a, 'sync', { id }));
  const serverDuplicates = (events: UniqueJobEvent[]) =>
    events.filter((event) => event.type === 'duplicate' && event.side === 'server');

  it('takes the enqueue lock at enqueue: a duplicate while the first is queued is dropped', async () => {
    const a = await start({ paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    expect(await keysOf(a)).toEqual([enqueueKey(a, 'u1')]);
    expect(await redis.get(enqueueKey(a, 'u1'))).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      strategy: 'log',
      existingJobId: first.id,
    });
    a.start();
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('while a job runs it holds only the run-time lock: one duplicate may queue (and is locked), a second is dropped', async () => {
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
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    expect(await owners(redis, runtimeKey(a, 'u1'))).toEqual([first.id]);

    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    expect(await redis.get(enqueueKey(a, 'u1'))).toBe(second.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).toMatchObject({
      status: 'duplicate',
      existingJobId: second.id,
    });

    gate.resolve();
    await expect(a.finished(first)).resolves.toBe(1);
    await expect(a.finished(second)).resolves.toBe(2);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, second.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a queued duplicate that starts while the first still runs meets the run-time lock (log) and releases its enqueue lock', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      worker: { concurrency: 2 },
      handler: async (job: TestJob) => {
        if (job.data.n === 1) {
          started.resolve();
          await gate.promise;
        }
        return job.data.n;
      },
    });
    const events = recordEvents(a);
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await expect(a.finished(second)).resolves.toBeNull(); // completed without running
    expect(serverDuplicates(events)).toEqual([
      expect.objectContaining({ strategy: 'log', jobId: second.id, existingJobId: first.id }),
    ]);
    // The skipped job ended, so its enqueue lock is gone; only the holder's run-time lock remains.
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    const third = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));

    gate.resolve();
    await a.finished(first);
    await a.finished(third);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, third.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a duplicate rescheduled on a run-time conflict keeps its enqueue lock while it waits', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      unique: { ...unique, onConflict: { client: 'log', server: 'reschedule' }, rescheduleIn: 300 },
      worker: { concurrency: 2 },
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
    const rescheduled = libraryEvent(a, (event) => event.type === 'rescheduled');
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    expect(await rescheduled).toMatchObject({ jobId: second.id });
    expect(await redis.get(enqueueKey(a, 'u1'))).toBe(second.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).toMatchObject({
      status: 'duplicate',
      existingJobId: second.id,
    });
    gate.resolve();
    await a.finished(first);
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
    await a.finished(again);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, again.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a failed attempt that will retry takes the enqueue lock back and drops the run-time lock', async () => {
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
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    expect(await keysOf(a)).toEqual([enqueueKey(a, 'u1')]);
    expect(await redis.get(enqueueKey(a, 'u1'))).toBe(first.id);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe('retried');
    expect(a.runs.map((job) => job.id)).toEqual([first.id, first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('after the final failure both locks are gone and the digest is accepted again', async () => {
    const a = await start({
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

  it('a job taken by a crashed worker keeps its enqueue lock until the stalled-job recovery runs it under both locks', async () => {
    const gate = hold();
    const running = hold();
    const a = await start({
      paused: true,
      worker: { stalledInterval: 300 },
      handler: async () => {
        running.resolve();
        await gate.promise;
        return 'recovered';
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const crashed = await takeWithCrashingWorker(a.queue.name);
    cleanups.push(crashed.close);
    expect(crashed.job.id).toBe(first.id);
    expect(await keysOf(a)).toEqual([enqueueKey(a, 'u1')]);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });

    const stalled = queueEvent(a.queueEvents, 'stalled', first.id!);
    a.start();
    await stalled;
    await running.promise;
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    expect(await owners(redis, runtimeKey(a, 'u1'))).toEqual([first.id]);
    gate.resolve();
    await expect(a.finished(first)).resolves.toBe('recovered');
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a delayed job holds the enqueue lock from enqueue until it starts', async () => {
    const gate = hold();
    const running = hold();
    const a = await start({
      handler: async () => {
        running.resolve();
        await gate.promise;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 300 }));
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    expect(await keysOf(a)).toEqual([enqueueKey(a, 'u1')]);
    expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
    await running.promise;
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    gate.resolve();
    await a.finished(first);
    expect(await keysOf(a)).toEqual([]);
  });

  it('with lockTimeout > 0 a queued duplicate waits for the running job and then runs', async () => {
    const gate = hold();
    const started = hold();
    const order: string[] = [];
    const a = await start({
      unique: { ...unique, lockTimeout: 20_000 },
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
    const events = recordEvents(a);
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await waitFor(async () => (await a.queue.getJobState(second.id!)) === 'active', 'the duplicate to be taken');
    expect(a.runs.map((job) => job.id)).toEqual([first.id]); // active, but waiting for the run-time lock
    expect(await redis.get(enqueueKey(a, 'u1'))).toBe(second.id); // still queued as far as enqueue goes
    gate.resolve();
    await expect(a.finished(second)).resolves.toBe(2);
    await expect(a.finished(first)).resolves.toBe(1);
    expect(order).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
    expect(serverDuplicates(events)).toEqual([]);
    expect(await keysOf(a)).toEqual([]);
  });
});
