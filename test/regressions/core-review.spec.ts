// Regressions found by the review of the core: each asserts the behaviour the spec and docs promise.
import { describe, expect, it } from '@jest/globals';
import { Job } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { holdFirstRun } from '../support/gates.js';
import { EventLog } from '../support/events.js';
import { byId, dedupKey, digestOf, enqueuedJob, owners, queuedKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { takeWithCrashingWorker } from '../locks/helpers.js';

describe('core review regressions', () => {
  const { redis, start, onCleanup } = useApps('rv');

  it('R1 replace + uniqueAcross queues: a holder on another queue is not "released" while it still exists', async () => {
    const prefix = uniqueName('ujt');
    const unique: UniqueJobOptions = {
      lock: 'until_executed',
      lockArgs: byId,
      uniqueAcross: 'queues',
      onConflict: 'replace',
    };
    const a = await start({ unique, module: { prefix }, paused: true });
    const b = await start({ unique, module: { prefix }, paused: true });
    const fromA = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await b.service.enqueue(b.queue, 'sync', { id: 'u1', n: 2 });
    const value = digestOf(a, 'sync', { id: 'u1' });
    const stillInA = await a.queue.getJob(fromA.id!);
    const waiting = (await a.queue.getWaitingCount()) + (await b.queue.getWaitingCount());
    // Exactly one job per digest across both queues, and the lock is held by a job that exists.
    expect(waiting).toBe(1);
    const holders = await owners(redis, queuedKey(prefix, value));
    expect(holders).toHaveLength(1);
    if (stillInA) expect(holders).toEqual([fromA.id]);
  });

  it('R2 replace + until_expired: a holder that already RAN is not deleted and the job does not run twice in the period', async () => {
    const a = await start({
      unique: { lock: 'until_expired', lockTtl: 60_000, lockArgs: byId, onConflict: 'replace' },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await a.finished(first);
    const second = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 });
    // "replace: the existing job is removed if it has not started" — this one has completed.
    expect(await a.queue.getJobState(first.id!)).toBe('completed');
    expect(second.status).toBe('duplicate');
    if (second.status === 'enqueued') await a.finished(second.job);
    expect(a.runs).toHaveLength(1);
  });

  it('R3 until_expired: routine queue.clean of completed jobs does not release the lock before lockTtl', async () => {
    const a = await start({ unique: { lock: 'until_expired', lockTtl: 60_000, lockArgs: byId } });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await a.finished(first);
    await a.queue.clean(0, 100, 'completed');
    const again = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 });
    expect(again.status).toBe('duplicate');
    if (again.status === 'enqueued') await a.finished(again.job);
    expect(a.runs).toHaveLength(1);
  });

  it('R4 a holder that no longer exists: queue.add returns a handle with its id (as BullMQ does), the explicit API says duplicate', async () => {
    const a = await start({ unique: { lock: 'until_expired', lockTtl: 60_000, lockArgs: byId } });
    const first = await a.queue.add('sync', { id: 'u1', n: 1 }, { removeOnComplete: true });
    await a.finished(first);
    expect(await Job.fromId(a.queue, first.id!)).toBeUndefined(); // removed on completion; the period goes on
    const returned = await a.queue.add('sync', { id: 'u1', n: 2 });
    expect(returned.id).toBe(first.id); // documented: the holder's id, with the caller's data (BullMQ's convention)
    expect(await a.queue.getJobCounts('waiting', 'active', 'delayed')).toEqual({ waiting: 0, active: 0, delayed: 0 });
    await expect(a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).resolves.toMatchObject({
      status: 'duplicate',
      existingJobId: first.id,
    });
  });

  it('R5 until_and_while_executing (defaults): a newer copy queued while one runs is processed after it (choosing-a-lock.md)', async () => {
    const { gate, started, handler } = holdFirstRun();
    const a = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId },
      worker: { concurrency: 2 },
      handler,
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    await started.promise;
    const newer = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    // Wait until B's worker run has met A's run-time lock (whatever the strategy did with it).
    await new EventLog(a).next(
      (e) => (e.type === 'duplicate' || e.type === 'rescheduled') && 'jobId' in e && e.jobId === newer.id,
    );
    gate.resolve();
    await a.finished(first);
    await a.finished(newer);
    // "If the new copy carries newer data that must be processed after the current run, use
    // until_and_while_executing (one may queue behind the running one)".
    expect(a.runs.map((job) => (job.data as { n: number }).n)).toEqual([1, 2]);
  });

  /** A job taken by a crashed worker, which the app's stalled checker (maxStalledCount 0) fails for good. */
  async function dieByStall(a: TestApp, id: string): Promise<Job> {
    const enqueued = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id }));
    const crashed = await takeWithCrashingWorker(a.queue.name);
    onCleanup(() => crashed.close());
    a.start();
    await waitFor('the stalled job to die', async () => (await a.queue.getJobState(enqueued.id!)) === 'failed');
    const dead = (await a.queue.getJob(enqueued.id!))!; // read after it failed, so failedReason is set
    expect(dead.failedReason).toMatch(/stalled more than allowable limit/);
    expect(a.runs).toHaveLength(0);
    return dead;
  }

  it('R7 until_executed + lockTtl: a job that dies by stalling (max stalled count) releases its lock', async () => {
    const a = await start({
      unique: { lock: 'until_executed', lockTtl: 600_000, lockArgs: byId },
      worker: { maxStalledCount: 0, stalledInterval: 300 },
      paused: true,
    });
    await dieByStall(a, 'u1');
    // The job is dead; the spec says its lock goes with it ("a dead job never blocks its event forever"). The release
    // follows the worker's `failed` event, so wait for it.
    const key = dedupKey(a.queue.name, digestOf(a, 'sync', { id: 'u1' }));
    await waitFor('the dead job to release its lock', async () => (await redis.get(key)) === null);
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).status).toBe('enqueued');
  });

  it('R8 uniqueAcross queues (semaphore path): a job that dies by stalling does not block its digest for 24 h', async () => {
    const prefix = uniqueName('ujt');
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: byId, uniqueAcross: 'queues' },
      module: { prefix },
      worker: { maxStalledCount: 0, stalledInterval: 300 },
      paused: true,
    });
    await dieByStall(a, 'u1');
    const key = queuedKey(prefix, digestOf(a, 'sync', { id: 'u1' }));
    await waitFor('the dead job to release its lock', async () => (await owners(redis, key)).length === 0);
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 })).status).toBe('enqueued');
  });
});
