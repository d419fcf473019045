import { once } from 'node:events';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { UnrecoverableError, type Job } from 'bullmq';
import { startApp, type TestApp } from '../support/app.js';
import { lockKeys, redisClient, uniqueName } from '../support/redis.js';
import { EventLog, Gates, workerOf } from './helpers.js';

type Data = { id: string; tag: string };
const byId = (data: Data) => data.id;

describe('onConflict: reschedule (server side, while_executing)', () => {
  let app: TestApp | undefined;
  let events: EventLog | undefined;
  const redis = redisClient();
  afterEach(async () => {
    Gates.releaseEverything();
    events?.stop();
    events = undefined;
    await app?.close();
    app = undefined;
  });
  afterAll(async () => redis.quit());

  const rescheduleCount = async (app: TestApp, job: Job) =>
    Number((await redis.hget(`bull:${app.queue.name}:${job.id}`, 'ujReschedules')) ?? 0);

  it('moves the job back to delayed without using an attempt; it runs after the holder finished', async () => {
    const queueName = uniqueName('resched');
    const gates = new Gates().hold('first');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'while_executing', onConflict: 'reschedule', lockArgs: byId, rescheduleIn: 1000 },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    events = new EventLog(app);
    const first = await app.queue.add('sync', { id: 'a', tag: 'first' });
    await gates.started('first');
    // attempts: 1 — if a reschedule used an attempt, the job could never run.
    const second = await app.queue.add('sync', { id: 'a', tag: 'second' }, { attempts: 1 });
    const rescheduled = await events.next((e) => e.type === 'rescheduled' && e.jobId === second.id);
    const digest = app.service.digestOf(queueName, 'sync', { id: 'a' })!;
    expect(rescheduled).toMatchObject({ type: 'rescheduled', digest, delay: 1000, reschedules: 1 });

    expect(await app.queue.getJobState(second.id!)).toBe('delayed');
    const delayed = (await app.queue.getJob(second.id!))!;
    expect(delayed.attemptsMade).toBe(0);
    expect(delayed.failedReason).toBeFalsy();
    expect(await rescheduleCount(app, second)).toBe(1);
    expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await app.service.deadSet.size()).toBe(0);

    gates.release('first');
    await expect(app.finished(first)).resolves.toBe('ran:first');
    await expect(app.finished(second)).resolves.toBe('ran:second');
    expect(app.runs.map((job) => job.id)).toEqual([first.id, second.id]);
    const done = (await app.queue.getJob(second.id!))!;
    expect(done.attemptsMade).toBe(1);
    expect(await rescheduleCount(app, second)).toBe(events.of('rescheduled').length);
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });

  it('is rescheduled as long as the holder stays (up to maxReschedules), then runs', async () => {
    const queueName = uniqueName('resched');
    const gates = new Gates().hold('first');
    app = await startApp({
      queue: queueName,
      unique: {
        lock: 'while_executing',
        onConflict: 'reschedule',
        lockArgs: byId,
        rescheduleIn: 150,
        maxReschedules: 50,
      },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    events = new EventLog(app);
    await app.queue.add('sync', { id: 'a', tag: 'first' });
    await gates.started('first');
    const second = await app.queue.add('sync', { id: 'a', tag: 'second' });
    await events.next((e) => e.type === 'rescheduled' && e.jobId === second.id && e.reschedules === 3);
    expect(app.runs).toHaveLength(1);
    gates.release('first');
    await expect(app.finished(second)).resolves.toBe('ran:second');
    const reschedules = events.of('rescheduled').map((e) => e.reschedules);
    expect(reschedules).toEqual(reschedules.map((_, i) => i + 1));
    expect((await app.queue.getJob(second.id!))!.attemptsMade).toBe(1);
  });

  it('with maxReschedules 0 the first conflict falls back to reject', async () => {
    const queueName = uniqueName('resched');
    const gates = new Gates().hold('first');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'while_executing', onConflict: 'reschedule', lockArgs: byId, maxReschedules: 0 },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    events = new EventLog(app);
    const worker = workerOf(app);
    const first = await app.queue.add('sync', { id: 'a', tag: 'first' });
    await gates.started('first');
    const failed = once(worker, 'failed') as Promise<[Job, Error]>;
    const second = await app.queue.add('sync', { id: 'a', tag: 'second' }, { attempts: 3 });
    const [failedJob, error] = await failed;
    expect(failedJob.id).toBe(second.id);
    expect(error).toBeInstanceOf(UnrecoverableError);
    await expect(app.finished(second)).rejects.toThrow(/Rejected/);
    expect(await app.queue.getJobState(second.id!)).toBe('failed');
    expect(events.of('rescheduled')).toEqual([]);
    expect(await app.service.deadSet.list()).toEqual([
      expect.objectContaining({
        side: 'server',
        jobId: second.id,
        existingJobId: first.id,
        data: { id: 'a', tag: 'second' },
      }),
    ]);
    expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    expect(await app.queue.getJobState(first.id!)).toBe('active');
  });

  it('with maxReschedules 1 and a holder that stays: rescheduled once, then rejected', async () => {
    const queueName = uniqueName('resched');
    const gates = new Gates().hold('first');
    app = await startApp({
      queue: queueName,
      unique: {
        lock: 'while_executing',
        onConflict: 'reschedule',
        lockArgs: byId,
        maxReschedules: 1,
        rescheduleIn: 200,
      },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    events = new EventLog(app);
    const first = await app.queue.add('sync', { id: 'a', tag: 'first' });
    await gates.started('first');
    const second = await app.queue.add('sync', { id: 'a', tag: 'second' });
    await expect(app.finished(second)).rejects.toThrow(/Rejected/);

    expect(events.of('rescheduled')).toEqual([expect.objectContaining({ jobId: second.id, reschedules: 1 })]);
    expect(events.of('rejected')).toEqual([expect.objectContaining({ side: 'server', existingJobId: first.id })]);
    expect(await rescheduleCount(app, second)).toBe(2);
    const [entry] = await app.service.deadSet.list();
    expect(entry).toMatchObject({ side: 'server', jobId: second.id, existingJobId: first.id });
    expect((await app.queue.getJob(second.id!))!.attemptsMade).toBe(1);
    expect(app.runs.map((job) => job.id)).toEqual([first.id]);

    gates.release('first');
    await app.finished(first);
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });
});
