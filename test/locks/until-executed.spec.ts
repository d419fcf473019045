// until_executed: the enqueue lock lives from enqueue until the job completed or finally failed. What it shares with
// other lock types (enqueue, retry, failure, delay) is in every-lock.spec.ts.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { hold } from '../support/gates.js';
import { byId, dedupKey, digestOf, enqueuedJob } from '../support/locks.js';
import { queueEvent } from '../support/wait.js';
import { takeWithCrashingWorker } from './helpers.js';

const unique: UniqueJobOptions = { lock: 'until_executed', lockArgs: byId };

describe('until_executed', () => {
  const { redis, start, keysOf, onCleanup } = useApps('ued', { unique });
  const keyOf = (a: TestApp, id: string) => dedupKey(a.queue.name, digestOf(a, 'sync', { id }));

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
    onCleanup(crashed.close);
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
});
