import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { asDuplicate, asEnqueued, byId, dedupHolder } from '../support/locks.js';
import { runData } from './helpers.js';

type Data = { id: string; tag: string };

describe('onConflict { client, server } on until_and_while_executing', () => {
  const { redis, start, keysOf } = useApps('split');
  const startSplit = (gates: Gates, unique: Partial<UniqueJobOptions>, options: Partial<TestAppOptions> = {}) =>
    start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId, ...unique },
      handler: gates.handler,
      worker: { concurrency: 2 },
      ...options,
    });

  it('client "reject" at enqueue, server "reschedule" in the worker', async () => {
    const gates = new Gates().hold('A');
    const app = await startSplit(gates, { onConflict: { client: 'reject', server: 'reschedule' }, rescheduleIn: 1000 });
    const events = new EventLog(app);
    const a = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'A' }));
    const digest = a.digest!;
    await gates.started('A');
    // A runs: it holds the run-time lock and gave its enqueue lock up, so B can be enqueued...
    expect(await dedupHolder(redis, app.queue.name, digest)).toBeNull();
    const b = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'B' }));
    // ...and, meeting A's run-time lock in the worker, B is rescheduled (server strategy), keeping its enqueue lock.
    await events.next((e) => e.type === 'rescheduled' && e.jobId === b.job.id);
    expect(await dedupHolder(redis, app.queue.name, digest)).toBe(b.job.id);
    expect(app.runs.map((job) => job.id)).toEqual([a.job.id]);

    // C meets B's enqueue lock at enqueue: rejected (client strategy) into the dead set.
    const c = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'C' }));
    expect(c).toMatchObject({ strategy: 'reject', existingJobId: b.job.id });
    expect(await app.service.deadSet.get(c.deadSetEntryId!)).toMatchObject({
      side: 'client',
      existingJobId: b.job.id,
      data: { id: 'x', tag: 'C' },
    });
    expect(events.of('duplicate').filter((e) => e.side === 'client')).toEqual([]);
    expect(await app.queue.getJobCounts('waiting', 'delayed', 'active')).toEqual({ waiting: 0, delayed: 1, active: 1 });

    gates.release('A');
    await expect(app.finished(a.job)).resolves.toBe('ran:A');
    await expect(app.finished(b.job)).resolves.toBe('ran:B');
    expect(runData<Data>(app).map((data) => data.tag)).toEqual(['A', 'B']);
    expect((await app.queue.getJob(b.job.id!))!.attemptsMade).toBe(1);
    expect(await app.service.deadSet.size()).toBe(1);
    expect(await keysOf(app)).toEqual([]);
  });

  it('client "raise" at enqueue, server "log" in the worker', async () => {
    const gates = new Gates().hold('A');
    const app = await startSplit(gates, { onConflict: { client: 'raise', server: 'log' } }, { paused: true });
    const events = new EventLog(app);
    const a = await app.queue.add('sync', { id: 'x', tag: 'A' });
    await expect(app.queue.add('sync', { id: 'x', tag: 'dup' })).rejects.toMatchObject({
      name: 'DuplicateJobError',
      existingJobId: a.id,
    });
    app.start();
    await gates.started('A');
    const b = await app.queue.add('sync', { id: 'x', tag: 'B' });
    // B meets A's run-time lock: logged and completed without running; its enqueue lock is released.
    await expect(app.finished(b)).resolves.toBeNull();
    expect(events.of('duplicate').map((e) => [e.side, e.strategy])).toEqual([
      ['client', 'raise'],
      ['server', 'log'],
    ]);
    expect(runData<Data>(app).map((data) => data.tag)).toEqual(['A']);
    gates.release('A');
    await app.finished(a);
    expect(await keysOf(app)).toEqual([]);
  });

  it('client "log" at enqueue, server "reject" in the worker: the rejected job gives its enqueue lock up', async () => {
    const gates = new Gates().hold('A');
    const app = await startSplit(gates, { onConflict: { client: 'log', server: 'reject' } });
    const a = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'A' }));
    await gates.started('A');
    const b = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'B' }));
    await expect(app.finished(b.job)).rejects.toThrow(/Rejected/);
    expect(await app.service.deadSet.list()).toEqual([
      expect.objectContaining({ side: 'server', jobId: b.job.id, existingJobId: a.job.id }),
    ]);
    // B ended, so its enqueue lock went with it (nothing blocks the digest at enqueue while A still runs).
    expect(await dedupHolder(redis, app.queue.name, a.digest!)).toBeNull();
    expect(await keysOf(app)).toEqual([`${app.prefix}:{${a.digest}}:running`]);
    gates.release('A');
    await expect(app.finished(a.job)).resolves.toBe('ran:A');
    const c = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'C' }));
    await expect(app.finished(c.job)).resolves.toBe('ran:C');
    expect(runData<Data>(app).map((data) => data.tag)).toEqual(['A', 'C']);
    expect(await keysOf(app)).toEqual([]);
  });
});
