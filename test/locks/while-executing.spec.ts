// while_executing: no enqueue lock, a run-time lock while the job runs. What it shares with other lock types is in
// every-lock.spec.ts.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import { lockState } from '../../lib/ops/testing/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold, holdFirstRun } from '../support/gates.js';
import { byId, digestOf, enqueuedJob, members, owners, runningKey, runtimeOwner } from '../support/locks.js';
import { queueEvent } from '../support/wait.js';
import { type Interval, overlapping, takeWithCrashingWorker, type TestJob } from './helpers.js';

const unique: UniqueJobOptions = { lock: 'while_executing', lockArgs: byId };

describe('while_executing', () => {
  const { redis, start, keysOf, onCleanup } = useApps('we', { unique });
  const lockOf = (a: TestApp, id: string) => runningKey(a.prefix, digestOf(a, 'sync', { id }));

  it('takes no lock at enqueue: jobs with one digest are all enqueued and run one after the other', async () => {
    const a = await start({ paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    expect(await keysOf(a)).toEqual([]);
    expect(await a.queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
    a.start();
    await a.finished(first);
    await a.finished(second);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, second.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('holds a run-time lock while running: a duplicate that starts meanwhile completes without running (log)', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      worker: { concurrency: 2 },
      handler: async (job: TestJob) => {
        started.resolve();
        await gate.promise;
        return job.data.n;
      },
    });
    const events = new EventLog(a);
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    expect(await keysOf(a)).toEqual([lockOf(a, 'u1')]);
    expect(await owners(redis, lockOf(a, 'u1'))).toEqual([first.id]);

    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await expect(a.finished(second)).resolves.toBeNull(); // completed without running
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(events.duplicates('server')).toEqual([
      expect.objectContaining({ strategy: 'log', jobId: second.id, existingJobId: first.id }),
    ]);
    expect(await owners(redis, lockOf(a, 'u1'))).toEqual([first.id]);

    gate.resolve();
    await expect(a.finished(first)).resolves.toBe(1);
    expect(await keysOf(a)).toEqual([]);
  });

  // A run-time lock's owners are JSON pairs of queue and id; a job id of the same look once read as one (holder "5",
  // queue "x").
  it('a job id that looks like a JSON pair is its own owner, reported as it is', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({ worker: { concurrency: 2 }, handler });
    const events = new EventLog(a);
    const odd = '["x","5"]';
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }, { jobId: odd }));
    await started.promise;
    expect(await members(redis, lockOf(a, 'u1'))).toEqual([runtimeOwner(a, odd)]);
    expect(await lockState(a.moduleRef, a.queue, 'sync', { id: 'u1' })).toMatchObject({ runtime: { holders: [odd] } });
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await expect(a.finished(second)).resolves.toBeNull();
    expect(events.duplicates('server')).toEqual([expect.objectContaining({ jobId: second.id, existingJobId: odd })]);
    gate.resolve();
    await expect(a.finished(first)).resolves.toBe(1);
    expect(await keysOf(a)).toEqual([]);
  });

  it('releases the run-time lock when an attempt fails: a duplicate runs while the job waits for its retry', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      handler: async (job: TestJob) => {
        if (job.data.n === 1 && job.attemptsMade === 0) {
          started.resolve();
          await gate.promise;
          throw new Error('transient');
        }
        return job.data.n;
      },
    });
    const events = new EventLog(a);
    const first = enqueuedJob(
      await a.service.enqueue(
        a.queue,
        'sync',
        { id: 'u1', n: 1 },
        { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      ),
    );
    await started.promise;
    expect(await owners(redis, lockOf(a, 'u1'))).toEqual([first.id]);
    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    expect(await keysOf(a)).toEqual([]);

    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await expect(a.finished(second)).resolves.toBe(2);
    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe(1);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, second.id, first.id]);
    expect(events.duplicates('server')).toEqual([]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a job recovered from a crashed worker takes the run-time lock under its own id and runs once more', async () => {
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
    onCleanup(crashed.close);
    expect(crashed.job.id).toBe(first.id);
    expect(await keysOf(a)).toEqual([]);

    const stalled = queueEvent(a.queueEvents, 'stalled', first.id!);
    a.start();
    await stalled;
    await running.promise;
    expect(await owners(redis, lockOf(a, 'u1'))).toEqual([first.id]);
    gate.resolve();
    await expect(a.finished(first)).resolves.toBe('recovered');
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a run-time lock whose holder crashed (stopped renewing) is freed by its lease', async () => {
    const a = await start({ unique: { ...unique, lockTimeout: 20_000 } });
    const key = lockOf(a, 'u1');
    const [seconds] = await redis.time();
    // A holder that crashed mid-job: its lease (ending in 1.5 s, server clock) is never renewed.
    await redis.zadd(key, Number(seconds) * 1000 + 1500, 'crashed-holder');
    expect(await keysOf(a)).toEqual([key]);
    const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    await a.finished(job);
    expect(a.runs.map((run) => run.id)).toEqual([job.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a delayed job takes no lock until it runs', async () => {
    const running = hold();
    const gate = hold();
    // The worker starts after the checks on the delayed job: a loaded machine may take longer than the delay.
    const a = await start({
      paused: true,
      handler: async () => {
        running.resolve();
        await gate.promise;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 300 }));
    expect(await a.queue.getJobState(first.id!)).toBe('delayed');
    expect(await keysOf(a)).toEqual([]);
    a.start();
    await running.promise;
    expect(await owners(redis, lockOf(a, 'u1'))).toEqual([first.id]);
    gate.resolve();
    await a.finished(first);
    expect(await keysOf(a)).toEqual([]);
  });

  it('two jobs with one digest never run at the same time, even with free worker slots (lockTimeout waits)', async () => {
    const intervals: Interval[] = [];
    const a = await start({
      unique: { ...unique, lockTimeout: 20_000 },
      worker: { concurrency: 4 },
      handler: async (job: TestJob) => {
        const start = Date.now();
        await new Promise((resolve) => setTimeout(resolve, 60)); // work long enough for an overlap to show
        intervals.push({ id: job.id!, key: job.data.id, start, end: Date.now() });
      },
    });
    const jobs = [];
    for (let n = 0; n < 4; n++) jobs.push(enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n })));
    await Promise.all(jobs.map((job) => a.finished(job)));
    expect(intervals.map((i) => i.id).sort()).toEqual(jobs.map((job) => job.id).sort());
    expect(overlapping(intervals)).toBeUndefined();
    expect(await keysOf(a)).toEqual([]);
  });

  it('jobs with different digests run concurrently', async () => {
    const bothStarted = hold();
    let started = 0;
    const a = await start({
      worker: { concurrency: 2 },
      handler: async () => {
        if (++started === 2) bothStarted.resolve();
        // Each waits (bounded) for the other to start: both see 2 only when they run at once.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([bothStarted.promise, new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]);
        clearTimeout(timer);
        return started;
      },
    });
    const one = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const two = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u2' }));
    const results = await Promise.all([a.finished(one), a.finished(two)]);
    expect(results).toEqual([2, 2]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a lockTimeout that runs out while the holder still runs applies the strategy', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({
      unique: { ...unique, lockTimeout: 200 },
      worker: { concurrency: 2 },
      handler,
    });
    const events = new EventLog(a);
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await expect(a.finished(second)).resolves.toBeNull(); // completed without running
    expect(events.duplicates('server')).toEqual([
      expect.objectContaining({ jobId: second.id, existingJobId: first.id }),
    ]);
    gate.resolve();
    await a.finished(first);
    expect(a.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await keysOf(a)).toEqual([]);
  });
});
