// L2: a finished job that re-enters the queue (`job.retry()`, `queue.retryJobs()`) takes its enqueue lock again: while
// it waits, a duplicate is refused naming it; and it cannot re-enter while another job holds the digest's lock.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { DuplicateJobError, type UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { byId, dedupHolder, digestOf, enqueuedJob, owners, queuedKey } from '../support/locks.js';
import type { TestJob } from '../locks/helpers.js';
import { enqueueUnlocked, failureOf } from './lifecycle-helpers.js';

/** Jobs with `fail` set throw; the others return their `n`. */
const failWhenAsked = async (job: TestJob) => {
  if (job.data.fail) throw new Error('boom');
  return job.data.n;
};

describe('L2 a finished job re-entering the queue takes its lock again', () => {
  const { redis, start } = useApps('lcre');

  /**
   * Runs the job `{ id, fail }` to its final failure (or completion, without `fail`), waits until the library reported
   * its enqueue lock released, then pauses the queue, so that a job put back stays waiting.
   */
  async function finishThenPause(app: TestApp, events: EventLog, data: { id: string; fail?: boolean }): Promise<Job> {
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { ...data, n: 1 }));
    if (data.fail) await expect(app.finished(job)).rejects.toThrow('boom');
    else await expect(app.finished(job)).resolves.toBe(1);
    await events.next(enqueueUnlocked(job.id));
    await app.queue.pause();
    return (await app.queue.getJob(job.id!))!;
  }

  async function boot(unique: UniqueJobOptions) {
    const app = await start({ unique, handler: failWhenAsked });
    return { app, events: new EventLog(app) };
  }

  it('L2a until_executed (fast path): a failed job put back by job.retry() holds its lock while it waits', async () => {
    const { app, events } = await boot({ lock: 'until_executed', lockArgs: byId });
    const failed = await finishThenPause(app, events, { id: 'u1', fail: true });
    await failed.retry();
    expect(await app.queue.getJobState(failed.id!)).toBe('waiting');
    // Today the retried job holds no lock: the duplicate is enqueued next to it.
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: failed.id,
    });
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: 'u1' }))).toBe(failed.id);
  });

  it('L2b until_executed (fast path): job.retry() of a failed job whose digest another job holds rejects with DuplicateJobError; the job stays failed', async () => {
    const { app, events } = await boot({ lock: 'until_executed', lockArgs: byId });
    const failed = await finishThenPause(app, events, { id: 'u1', fail: true });
    const newer = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 2 }));
    const error = await failureOf(failed.retry());
    // Today the retry succeeds: two jobs of one digest wait side by side.
    expect(error).toBeInstanceOf(DuplicateJobError);
    expect(error).toMatchObject({ existingJobId: newer.id });
    expect(await app.queue.getJobState(failed.id!)).toBe('failed');
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: 'u1' }))).toBe(newer.id);
  });

  it('L2c until_executed (fast path): queue.retryJobs({ state: "failed" }) puts the job back with its lock', async () => {
    const { app, events } = await boot({ lock: 'until_executed', lockArgs: byId });
    const failed = await finishThenPause(app, events, { id: 'u1', fail: true });
    await app.queue.retryJobs({ state: 'failed' });
    expect(await app.queue.getJobState(failed.id!)).toBe('waiting');
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: failed.id,
    });
  });

  it('L2d until_executed (fast path): a completed job put back by job.retry("completed") holds its lock while it waits', async () => {
    const { app, events } = await boot({ lock: 'until_executed', lockArgs: byId });
    const completed = await finishThenPause(app, events, { id: 'u1' });
    await completed.retry('completed');
    expect(await app.queue.getJobState(completed.id!)).toBe('waiting');
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: completed.id,
    });
  });

  it('L2e until_executing: a failed job put back by job.retry() holds its lock again while it waits', async () => {
    const { app, events } = await boot({ lock: 'until_executing', lockArgs: byId });
    const failed = await finishThenPause(app, events, { id: 'u1', fail: true });
    await failed.retry();
    expect(await app.queue.getJobState(failed.id!)).toBe('waiting');
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
      status: 'duplicate',
      existingJobId: failed.id,
    });
  });

  it.each([
    ['lockLimit 2', { lockLimit: 2 }],
    ['uniqueAcross queues', { uniqueAcross: 'queues' }],
  ] as const)(
    'L2f until_executed, general path (%s): a failed job put back by job.retry() is among the holders of its slot set',
    async (_label, path) => {
      const { app, events } = await boot({ lock: 'until_executed', lockArgs: byId, ...path });
      const failed = await finishThenPause(app, events, { id: 'u1', fail: true });
      const key = queuedKey(app.prefix, digestOf(app, 'sync', { id: 'u1' }));
      expect(await owners(redis, key)).toEqual([]);
      await failed.retry();
      expect(await app.queue.getJobState(failed.id!)).toBe('waiting');
      expect(await owners(redis, key)).toContain(failed.id);
    },
  );

  // queue.retryJobs() takes the locks back after BullMQ queued the jobs: a running worker may start or finish one first
  // (found by the hostile review of session 24: the late re-take left a lock held by a running until_executing job, or
  // by a finished job, until the reaper came).
  const retriedTags = Array.from({ length: 8 }, (_, i) => `r${i}`);
  const retriedOnce = (handler: (job: TestJob) => Promise<unknown>) => async (job: TestJob) => {
    if (job.attemptsStarted === 1) throw new Error('boom');
    return handler(job);
  };
  async function failAllThenRetry(app: TestApp) {
    const jobs = [];
    for (const tag of retriedTags)
      jobs.push(enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: tag, tag })));
    for (const job of jobs) await expect(app.finished(job)).rejects.toThrow('boom');
    await app.queue.retryJobs({ state: 'failed' });
    return jobs;
  }
  const heldKeys = async (app: TestApp) => {
    const held: string[] = [];
    for (const tag of retriedTags)
      if (await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: tag }))) held.push(tag);
    return held;
  };

  it('L2g until_executing + lockTtl: jobs queue.retryJobs() puts back while a worker runs hold nothing while they run', async () => {
    const gates = new Gates().hold(...retriedTags);
    const app = await start({
      unique: { lock: 'until_executing', lockArgs: byId, lockTtl: 600_000 },
      worker: { concurrency: retriedTags.length },
      handler: retriedOnce(gates.handler),
    });
    const jobs = await failAllThenRetry(app);
    for (const tag of retriedTags) await gates.started(tag);
    expect(await heldKeys(app)).toEqual([]);
    gates.releaseAll();
    for (const job of jobs) await app.finished(job.id!);
    expect(await heldKeys(app)).toEqual([]);
  });

  it('L2h until_executed: jobs queue.retryJobs() puts back and a worker finishes at once leave no lock behind', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId },
      worker: { concurrency: retriedTags.length },
      module: { reaper: { interval: false } },
      handler: retriedOnce(async (job) => job.data.n ?? 0),
    });
    const jobs = await failAllThenRetry(app);
    for (const job of jobs) await app.finished(job.id!);
    expect(await heldKeys(app)).toEqual([]);
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'r0', n: 2 })).toMatchObject({ status: 'enqueued' });
  });
});
