// A job can come back to the queue by a path the library does not see: a process or a dashboard that retries it
// without the library (here: a plain BullMQ Queue, not guarded). It then waits without its enqueue lock; when it
// starts again it takes the lock back, or meets the job that took it meanwhile (the worker side of its client strategy).
// And a handler that moves its own job (moveToDelayed + DelayedError) keeps or takes back the lock, as BullMQ runs the
// job again.
import { describe, expect, it } from '@jest/globals';
import { DelayedError, Queue, type Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { byId, dedupHolder, digestOf, enqueuedJob } from '../support/locks.js';
import { bullOptions } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { enqueueUnlocked } from '../regressions/lifecycle-helpers.js';

type Data = { id: string; tag: string; fail?: boolean };

describe('a job brought back without the library', () => {
  const { redis, start, keysOf, onCleanup } = useApps('rsb');

  /** A plain BullMQ queue on the app's queue: what a process without the library (or a dashboard) uses. */
  function plainQueue(name: string): Queue {
    const queue = new Queue(name, bullOptions());
    onCleanup(() => queue.close());
    return queue;
  }

  async function failedJob(gates: Gates, onConflict: 'reject' | 'log') {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, onConflict },
      handler: async (job: Job) => {
        if ((job.data as Data).fail && job.attemptsMade === 0) throw new Error('boom'); // its first attempt only
        return gates.handler(job);
      },
    });
    const events = new EventLog(app);
    const failed = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', tag: 'a', fail: true }));
    await expect(app.finished(failed)).rejects.toThrow('boom');
    await events.next(enqueueUnlocked(failed.id));
    return { app, failed };
  }

  it('until_executed: it takes its lock back when it starts, so a duplicate meanwhile is refused naming it', async () => {
    const gates = new Gates().hold('a');
    const { app, failed } = await failedJob(gates, 'log');
    await (await plainQueue(app.queue.name).getJob(failed.id!))!.retry();
    await gates.started('a');
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: 'u1' }))).toBe(failed.id);
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', tag: 'b' })).toMatchObject({
      status: 'duplicate',
      existingJobId: failed.id,
    });
    gates.release('a');
    await expect(app.finished(failed.id!)).resolves.toBe('ran:a');
    expect(await keysOf(app)).toEqual([]);
  });

  it('until_executed: when another job took the lock meanwhile, it meets that job (reject: dead set) and never runs beside it', async () => {
    const gates = new Gates().hold('b');
    const { app, failed } = await failedJob(gates, 'reject');
    await app.queue.pause();
    await (await plainQueue(app.queue.name).getJob(failed.id!))!.retry();
    // The library did not see it come back: a new job of the digest takes the free lock.
    const newer = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', tag: 'b' }));
    await app.queue.resume();
    await expect(app.finished(failed.id!)).rejects.toThrow(/Rejected duplicate/);
    const [entry] = await app.service.deadSet.list();
    expect(entry).toMatchObject({ side: 'server', jobId: failed.id, existingJobId: newer.id });
    gates.release('b');
    await expect(app.finished(newer)).resolves.toBe('ran:b');
    expect(app.runs.map((job) => (job.data as Data).tag)).toEqual(['a', 'b']); // 'a' ran only its first, failed attempt
  });
});

describe('a handler that moves its own job', () => {
  const { redis, start } = useApps('rsm');

  it('until_executing: moveToDelayed + DelayedError takes the lock back while the job waits in delayed', async () => {
    const app = await start({
      unique: { lock: 'until_executing', lockArgs: byId },
      handler: async (job: Job) => {
        if (job.attemptsStarted === 1) {
          await job.moveToDelayed(Date.now() + 60_000, job.token);
          throw new DelayedError();
        }
        return 'ran';
      },
    });
    const events = new EventLog(app);
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1' }));
    await events.next(enqueueUnlocked(job.id)); // released at start
    const key = digestOf(app, 'sync', { id: 'u1' });
    // Released at start, taken back after the handler threw: no event reports the retake.
    await waitFor('the lock taken back', async () => (await dedupHolder(redis, app.queue.name, key)) === job.id);
    expect(await app.queue.getJobState(job.id!)).toBe('delayed');
    expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1' })).toMatchObject({
      status: 'duplicate',
      existingJobId: job.id,
    });
    await (await app.queue.getJob(job.id!))!.promote();
    await expect(app.finished(job)).resolves.toBe('ran');
  });
});
