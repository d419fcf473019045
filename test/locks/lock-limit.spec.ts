// lockLimit: more than one holder per digest, on the library's semaphore keys, for every lock type.
import { describe, expect, it } from '@jest/globals';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, enqueuedJob, expiringKey, owners, queuedKey, runningKey } from '../support/locks.js';
import { scanKeys } from '../support/redis.js';
import { queueEvent, waitFor } from '../support/wait.js';
import type { TestJob } from './helpers.js';

describe('lockLimit', () => {
  const { redis, start, keysOf } = useApps('ll');
  const enqueueKey = (a: TestApp, id: string) => queuedKey(a.prefix, digestOf(a, 'sync', { id }));
  const runtimeKey = (a: TestApp, id: string) => runningKey(a.prefix, digestOf(a, 'sync', { id }));

  it('until_executed, lockLimit 2: admits two queued jobs on the semaphore key; the third is a duplicate', async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, paused: true });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    const third = await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 });
    expect(third).toMatchObject({ status: 'duplicate', strategy: 'log' });
    if (third.status !== 'duplicate') throw new Error('unexpected');
    expect([first.id, second.id]).toContain(third.existingJobId);

    // The semaphore path: the library's own key, no BullMQ deduplication key.
    expect(await keysOf(a)).toEqual([enqueueKey(a, 'u1')]);
    expect(await scanKeys(redis, `${a.queue.qualifiedName}:de:*`)).toEqual([]);
    expect(await owners(redis, enqueueKey(a, 'u1'))).toEqual([first.id, second.id].sort());
    // Another digest has its own slots.
    const other = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u2' }));

    a.start();
    await Promise.all([a.finished(first), a.finished(second), a.finished(other)]);
    expect(a.runs).toHaveLength(3);
    expect(await keysOf(a)).toEqual([]);
    enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 4 }));
  });

  it('until_executed, lockLimit 2: a slot frees when its job finally fails', async () => {
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      handler: async (job: TestJob) => {
        if (job.data.fail) throw new Error('always');
      },
    });
    const failing = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', fail: true }, { attempts: 2 }));
    await expect(a.finished(failing)).rejects.toThrow('always');
    expect(await keysOf(a)).toEqual([]);
  });

  it('until_executed, lockLimit 2: a job waiting for its retry keeps its slot', async () => {
    const gate = hold();
    const started = hold();
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      handler: async (job: TestJob) => {
        if (job.attemptsMade === 0 && job.data.n === 1) {
          started.resolve();
          await gate.promise;
          throw new Error('transient');
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
    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    expect(await owners(redis, enqueueKey(a, 'u1'))).toEqual([first.id]);
    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe(1);
    expect(await keysOf(a)).toEqual([]);
  });

  it('until_executing, lockLimit 2: two queued jobs; their slots free when they start, and a retry takes one back', async () => {
    const gate = hold();
    const bothStarted = hold();
    let started = 0;
    const a = await start({
      unique: { lock: 'until_executing', lockArgs: byId, lockLimit: 2 },
      paused: true,
      worker: { concurrency: 2 },
      handler: async (job: TestJob) => {
        if ((job.data.n ?? 0) <= 2) {
          if (++started === 2) bothStarted.resolve();
          await gate.promise;
          if (job.attemptsMade === 0 && job.data.n === 1) throw new Error('transient');
        }
        return job.data.n;
      },
    });
    const opts = { attempts: 2, backoff: { type: 'fixed' as const, delay: 60_000 } };
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }, opts));
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).status).toBe('duplicate');
    expect(await owners(redis, enqueueKey(a, 'u1'))).toEqual([first.id, second.id].sort());

    a.start();
    await bothStarted.promise;
    expect(await keysOf(a)).toEqual([]);

    const delayed = queueEvent(a.queueEvents, 'delayed', first.id!);
    gate.resolve();
    await delayed;
    await a.finished(second);
    // The job waiting for its retry holds one slot again (the second, finished, holds none).
    expect(await owners(redis, enqueueKey(a, 'u1'))).toEqual([first.id]);

    await (await a.queue.getJob(first.id!))!.promote();
    await expect(a.finished(first)).resolves.toBe(1);
    expect(await keysOf(a)).toEqual([]);
  });

  it('while_executing, lockLimit 2: two jobs with one digest run at once; a third that starts meanwhile is a duplicate', async () => {
    const gate = hold();
    const bothStarted = hold();
    let running = 0;
    const a = await start({
      unique: { lock: 'while_executing', lockArgs: byId, lockLimit: 2 },
      paused: true,
      worker: { concurrency: 3 },
      handler: async (job: TestJob) => {
        if (++running === 2) bothStarted.resolve();
        await gate.promise;
        running--;
        return job.data.n;
      },
    });
    const events = new EventLog(a);
    const jobs = [];
    for (let n = 1; n <= 3; n++) jobs.push(enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n })));
    expect(await keysOf(a)).toEqual([]);
    a.start();
    await bothStarted.promise;
    const skipped = await waitFor('the third job to meet the lock', () => events.duplicates('server')[0]);
    const skippedJob = jobs.find((job) => skipped.type === 'duplicate' && job.id === skipped.jobId)!;
    expect(skippedJob).toBeDefined();
    const holders = await owners(redis, runtimeKey(a, 'u1'));
    expect(holders).toHaveLength(2);
    expect(holders).not.toContain(skippedJob.id);
    await expect(a.finished(skippedJob)).resolves.toBeNull(); // completed without running
    gate.resolve();
    await Promise.all(jobs.map((job) => a.finished(job)));
    expect(a.runs.map((job) => job.id).sort()).toEqual(holders);
    expect(await keysOf(a)).toEqual([]);
  });

  it('while_executing, lockLimit 2 with lockTimeout: never more than two runs at once, and every job runs', async () => {
    let running = 0;
    let peak = 0;
    const a = await start({
      unique: { lock: 'while_executing', lockArgs: byId, lockLimit: 2, lockTimeout: 20_000 },
      worker: { concurrency: 4 },
      handler: async () => {
        peak = Math.max(peak, ++running);
        await new Promise((resolve) => setTimeout(resolve, 80)); // work long enough for an overlap to show
        running--;
      },
    });
    const jobs = [];
    for (let n = 1; n <= 5; n++) jobs.push(enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n })));
    await Promise.all(jobs.map((job) => a.finished(job)));
    expect(a.runs).toHaveLength(5);
    expect(peak).toBeLessThanOrEqual(2);
    expect(await keysOf(a)).toEqual([]);
  });

  it('until_and_while_executing, lockLimit 2: two queued, two running at once, the third is a duplicate at enqueue', async () => {
    const gate = hold();
    const bothStarted = hold();
    let running = 0;
    const a = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId, lockLimit: 2 },
      paused: true,
      worker: { concurrency: 3 },
      handler: async () => {
        if (++running === 2) bothStarted.resolve();
        await gate.promise;
      },
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 1 }));
    const second = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    expect((await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 })).status).toBe('duplicate');
    expect(await owners(redis, enqueueKey(a, 'u1'))).toEqual([first.id, second.id].sort());
    a.start();
    await bothStarted.promise;
    expect(await keysOf(a)).toEqual([runtimeKey(a, 'u1')]);
    expect(await owners(redis, runtimeKey(a, 'u1'))).toEqual([first.id, second.id].sort());
    gate.resolve();
    await Promise.all([a.finished(first), a.finished(second)]);
    expect(await keysOf(a)).toEqual([]);
  });

  it('until_expired, lockLimit 2: a delayed job holds its slot for lockTtl past its run time', async () => {
    const a = await start({
      unique: { lock: 'until_expired', lockArgs: byId, lockLimit: 2, lockTtl: 5_000 },
      paused: true,
    });
    const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { delay: 10_000 }));
    const key = expiringKey(a.prefix, digestOf(a, 'sync', { id: 'u1' }));
    const [seconds, micros] = await redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const expiry = Math.floor(Number(await redis.zscore(key, first.id!))); // its fraction is the slot's mark
    expect(expiry - now).toBeGreaterThan(13_000);
    expect(expiry - now).toBeLessThanOrEqual(15_000);
    expect(await redis.pttl(key)).toBeGreaterThan(13_000);
    await first.remove();
  });
});
