// until_and_while_executing: an enqueue lock until the job starts, then a run-time lock while it runs. What it shares
// with other lock types is in every-lock.spec.ts.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold, holdFirstRun } from '../support/gates.js';
import { byId, dedupKey, digestOf, enqueuedJob, owners, runningKey } from '../support/locks.js';
import { queueEvent } from '../support/wait.js';
import { takeWithCrashingWorker } from './helpers.js';

const unique: UniqueJobOptions = { lock: 'until_and_while_executing', lockArgs: byId };

describe('until_and_while_executing', () => {
  const { redis, start, keysOf, onCleanup } = useApps('uawe', { unique });
  const enqueueKey = (a: TestApp, id: string) => dedupKey(a.queue.name, digestOf(a, 'sync', { id }));
  const runtimeKey = (a: TestApp, id: string) => runningKey(a.prefix, digestOf(a, 'sync', { id }));

  it('while a job runs it holds only the run-time lock: one duplicate may queue (and is locked), a second is dropped', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({
      handler,
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

  it('job.updateData: both locks keep the digest the job was enqueued under', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({ handler, paused: true });
    const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await job.updateData({ id: 'u2', n: 1 });
    a.start();
    await started.promise;
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    expect(await owners(redis, runtimeKey(a, 'u1'))).toEqual([job.id]);
    gate.resolve();
    await a.finished(job);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a queued duplicate that starts while the first still runs meets the run-time lock (log) and releases its enqueue lock', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({
      unique: { ...unique, onConflict: 'log' }, // the default on this side is reschedule
      worker: { concurrency: 2 },
      handler,
    });
    const events = new EventLog(a);
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    await expect(a.finished(second)).resolves.toBeNull(); // completed without running
    expect(events.duplicates('server')).toEqual([
      expect.objectContaining({ strategy: 'log', jobId: second.id, existingJobId: first.id }),
    ]);
    // The skipped job ended, so its enqueue lock is gone; only the holder's run-time lock remains.
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    // The digest is accepted again once the holder is done (enqueued while it still ran, the third job could meet the
    // run-time lock too, depending on which of its start and the holder's release reaches Redis first).
    gate.resolve();
    await a.finished(first);
    const third = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
    await a.finished(third);
    expect(a.runs.map((job) => job.id)).toEqual([first.id, third.id]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('a duplicate rescheduled on a run-time conflict keeps its enqueue lock while it waits', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({
      unique: { ...unique, onConflict: { client: 'log', server: 'reschedule' }, rescheduleIn: 300 },
      worker: { concurrency: 2 },
      handler,
    });
    const events = new EventLog(a);
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    const rescheduled = events.next((event) => event.type === 'rescheduled');
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
    onCleanup(crashed.close);
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
});
