import { once } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { UnrecoverableError, type Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { uniqueName } from '../support/redis.js';
import { byId } from '../support/locks.js';
import { serverSide, workerOf } from './helpers.js';

describe('onConflict: reschedule (server side, while_executing)', () => {
  const { redis, start, keysOf } = useApps('resched');

  const rescheduleCount = async (app: TestApp, job: Job) =>
    Number((await redis.hget(`${app.queue.qualifiedName}:${job.id}`, 'ujReschedules')) ?? 0);

  it('moves the job back to delayed without using an attempt; it runs after the holder finished', async () => {
    const gates = new Gates().hold('first');
    const app = await start(serverSide('reschedule', gates, { rescheduleIn: 1000 }));
    const events = new EventLog(app);
    const first = await app.queue.add('sync', { id: 'a', tag: 'first' });
    await gates.started('first');
    // attempts: 1 — if a reschedule used an attempt, the job could never run.
    const second = await app.queue.add('sync', { id: 'a', tag: 'second' }, { attempts: 1 });
    const rescheduled = await events.next((e) => e.type === 'rescheduled' && e.jobId === second.id);
    const digest = app.service.digestOf(app.queue.name, 'sync', { id: 'a' })!;
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
    expect(await keysOf(app)).toEqual([]);
  });

  it('is rescheduled as long as the holder stays (up to maxReschedules), then runs', async () => {
    const gates = new Gates().hold('first');
    const app = await start(serverSide('reschedule', gates, { rescheduleIn: 150, maxReschedules: 50 }));
    const events = new EventLog(app);
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
    const gates = new Gates().hold('first');
    const app = await start(serverSide('reschedule', gates, { maxReschedules: 0 }));
    const events = new EventLog(app);
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
    const gates = new Gates().hold('first');
    const app = await start(serverSide('reschedule', gates, { maxReschedules: 1, rescheduleIn: 200 }));
    const events = new EventLog(app);
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
    expect(await keysOf(app)).toEqual([]);
  });

  // HINCRBY on the hash of a job removed under its worker (obliterate with force) made a hash holding only this field.
  it('counts reschedules on the job hash only while the job exists', async () => {
    const scripts = new RedisScripts(redis);
    const gone = `${uniqueName('resched')}:q:gone-job`;
    expect(await scripts.run('countInJob', [gone], ['ujReschedules'])).toBe(0);
    expect(await redis.exists(gone)).toBe(0);
    const live = `${uniqueName('resched')}:q:live-job`;
    await redis.hset(live, 'name', 'sync');
    try {
      expect(await scripts.run('countInJob', [live], ['ujReschedules'])).toBe(1);
      expect(await scripts.run('countInJob', [live], ['ujReschedules'])).toBe(2);
      expect(await redis.hget(live, 'ujReschedules')).toBe('2');
    } finally {
      await redis.del(live);
    }
  });

  it("job.retry with BullMQ's resetAttemptsMade gives the job its reschedules back; without it they are kept", async () => {
    const app = await start({
      unique: { lock: 'while_executing', onConflict: 'reschedule', lockArgs: byId },
      handler: async () => {
        throw new Error('declined');
      },
    });
    const failed = async (id: string) => {
      const job = await app.queue.add('sync', { id }, { attempts: 1 });
      await expect(app.finished(job)).rejects.toThrow('declined');
      // As if the job had met its lock's holder three times before it ran.
      await redis.hset(`${app.queue.qualifiedName}:${job.id}`, 'ujReschedules', 3);
      return (await app.queue.getJob(job.id!))!;
    };
    const reset = await failed('reset');
    await reset.retry('failed', { resetAttemptsMade: true });
    expect(await rescheduleCount(app, reset)).toBe(0);
    const kept = await failed('kept');
    await kept.retry('failed');
    expect(await rescheduleCount(app, kept)).toBe(3);
    await Promise.all([reset, kept].map((job) => expect(app.finished(job)).rejects.toThrow('declined')));
    expect(await keysOf(app)).toEqual([]);
  });
});
