import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { startApp, type TestApp } from '../support/app.js';
import { lockKeys, redisClient, uniqueName } from '../support/redis.js';
import { asDuplicate, asEnqueued, dedupHolder, EventLog, Gates, runData } from './helpers.js';

type Data = { id: string; tag: string };
const byId = (data: Data) => data.id;

describe('onConflict { client, server } on until_and_while_executing', () => {
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

  it('client "reject" at enqueue, server "reschedule" in the worker', async () => {
    const queueName = uniqueName('split');
    const gates = new Gates().hold('A');
    app = await startApp({
      queue: queueName,
      unique: {
        lock: 'until_and_while_executing',
        onConflict: { client: 'reject', server: 'reschedule' },
        lockArgs: byId,
        rescheduleIn: 1000,
      },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    events = new EventLog(app);
    const a = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'A' }));
    const digest = a.digest!;
    await gates.started('A');
    // A runs: it holds the run-time lock and gave its enqueue lock up, so B can be enqueued...
    expect(await dedupHolder(redis, queueName, digest)).toBeNull();
    const b = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'B' }));
    // ...and, meeting A's run-time lock in the worker, B is rescheduled (server strategy), keeping its enqueue lock.
    await events.next((e) => e.type === 'rescheduled' && e.jobId === b.job.id);
    expect(await dedupHolder(redis, queueName, digest)).toBe(b.job.id);
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
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });

  it('client "raise" at enqueue, server "log" in the worker', async () => {
    const queueName = uniqueName('split');
    const gates = new Gates().hold('A');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'until_and_while_executing', onConflict: { client: 'raise', server: 'log' }, lockArgs: byId },
      handler: gates.handler,
      worker: { concurrency: 2 },
      paused: true,
    });
    events = new EventLog(app);
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
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });

  it('client "log" at enqueue, server "reject" in the worker: the rejected job gives its enqueue lock up', async () => {
    const queueName = uniqueName('split');
    const gates = new Gates().hold('A');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'until_and_while_executing', onConflict: { client: 'log', server: 'reject' }, lockArgs: byId },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    const a = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'A' }));
    await gates.started('A');
    const b = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'B' }));
    await expect(app.finished(b.job)).rejects.toThrow(/Rejected/);
    expect(await app.service.deadSet.list()).toEqual([
      expect.objectContaining({ side: 'server', jobId: b.job.id, existingJobId: a.job.id }),
    ]);
    // B ended, so its enqueue lock went with it (nothing blocks the digest at enqueue while A still runs).
    expect(await dedupHolder(redis, queueName, a.digest!)).toBeNull();
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([`${app.prefix}:{${a.digest}}:running`]);
    gates.release('A');
    await expect(app.finished(a.job)).resolves.toBe('ran:A');
    const c = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'x', tag: 'C' }));
    await expect(app.finished(c.job)).resolves.toBe('ran:C');
    expect(runData<Data>(app).map((data) => data.tag)).toEqual(['A', 'C']);
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });
});
