import { describe, expect, it } from '@jest/globals';
import { FlowProducer, Queue } from 'bullmq';
import { bullOptions, deleteNamespaces, uniqueName } from '../support/redis.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { asDuplicate, asEnqueued, byId, dedupHolder, dedupKey } from '../support/locks.js';
import { clientSide, runData } from './helpers.js';

type Data = { id: string; tag?: string; n?: number };

describe('onConflict: replace (client side, until_executed)', () => {
  const { redis, start, keysOf, onCleanup } = useApps('repl');

  it('explicit API: the waiting job is removed and the new one enqueued with the lock (replacedJobId)', async () => {
    const app = await start(clientSide('replace'));
    const events = new EventLog(app);
    const first = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 1 }));
    const second = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 }));

    expect(second.replacedJobId).toBe(first.job.id);
    expect(second.job.id).not.toBe(first.job.id);
    expect(second.digest).toBe(first.digest);
    expect(await app.queue.getJob(first.job.id!)).toBeUndefined();
    expect(await app.queue.getJobState(first.job.id!)).toBe('unknown');
    expect(await app.queue.getJobState(second.job.id!)).toBe('waiting');
    expect((await app.queue.getJob(second.job.id!))?.data).toEqual({ id: 'a', n: 2 });
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    // The new job holds the lock.
    expect(await dedupHolder(redis, app.queue.name, first.digest!)).toBe(second.job.id);
    expect(await keysOf(app)).toEqual([dedupKey(app.queue.name, first.digest!)]);
    expect(events.of('replaced')).toEqual([
      expect.objectContaining({ digest: first.digest, jobId: second.job.id, replacedJobId: first.job.id }),
    ]);
    expect(await app.service.deadSet.size()).toBe(0);

    // Only the replacement runs, and it releases the lock.
    app.start();
    await app.finished(second.job);
    expect(runData<Data>(app)).toEqual([{ id: 'a', n: 2 }]);
    expect(await keysOf(app)).toEqual([]);
  });

  it('plain queue.add returns the new job; replacing again replaces the replacement', async () => {
    const app = await start(clientSide('replace'));
    const first = await app.queue.add('price', { id: 'a', n: 1 });
    const second = await app.queue.add('price', { id: 'a', n: 2 });
    const third = await app.queue.add('price', { id: 'a', n: 3 });
    expect(new Set([first.id, second.id, third.id]).size).toBe(3);
    expect(third.data).toEqual({ id: 'a', n: 3 });
    expect(await app.queue.getJob(first.id!)).toBeUndefined();
    expect(await app.queue.getJob(second.id!)).toBeUndefined();
    expect((await app.queue.getJobs(['waiting'])).map((job) => job.id)).toEqual([third.id]);
    const digest = app.service.digestOf(app.queue.name, 'price', { id: 'a' })!;
    expect(await dedupHolder(redis, app.queue.name, digest)).toBe(third.id);
    // A job with another digest is not touched.
    const other = await app.queue.add('price', { id: 'b', n: 1 });
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
    expect(await app.queue.getJobState(other.id!)).toBe('waiting');
  });

  it('an existing delayed job is replaced too', async () => {
    const app = await start(clientSide('replace'));
    const first = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 1 }, { delay: 60_000 }));
    expect(await app.queue.getJobState(first.job.id!)).toBe('delayed');
    const second = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 }));
    expect(second.replacedJobId).toBe(first.job.id);
    expect(await app.queue.getJob(first.job.id!)).toBeUndefined();
    expect(await app.queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 1, delayed: 0 });
    expect(await dedupHolder(redis, app.queue.name, first.digest!)).toBe(second.job.id);

    // And a delayed replacement replaces a delayed job, keeping its own delay.
    const third = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 3 }, { delay: 60_000 }));
    expect(third.replacedJobId).toBe(second.job.id);
    expect(await app.queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 1 });
    expect(await app.queue.getJobState(third.job.id!)).toBe('delayed');
  });

  it('an existing ACTIVE job cannot be replaced: falls back to reject and the active job is untouched', async () => {
    const gates = new Gates().hold('first');
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      handler: gates.handler,
    });
    const events = new EventLog(app);
    const first = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'first' }));
    await gates.started('first');

    const dup = asDuplicate(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'second' }));
    expect(dup).toMatchObject({ strategy: 'reject', existingJobId: first.job.id, digest: first.digest });
    // Plain queue.add falls back the same way and returns the running job.
    const viaAdd = await app.queue.add('price', { id: 'a', tag: 'third' });
    expect(viaAdd.id).toBe(first.job.id);

    expect(await app.queue.getJobState(first.job.id!)).toBe('active');
    expect(await dedupHolder(redis, app.queue.name, first.digest!)).toBe(first.job.id);
    expect(await app.queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 0 });
    const entries = await app.service.deadSet.list();
    expect(entries.map((entry) => entry.data)).toEqual([
      { id: 'a', tag: 'third' },
      { id: 'a', tag: 'second' },
    ]);
    expect(entries[1]).toMatchObject({ id: dup.deadSetEntryId, side: 'client', existingJobId: first.job.id });
    expect(events.of('replaced')).toEqual([]);
    expect(events.of('rejected')).toHaveLength(2);

    gates.release('first');
    await expect(app.finished(first.job)).resolves.toBe('ran:first');
    expect(runData<Data>(app).map((data) => data.tag)).toEqual(['first']);
    expect(await keysOf(app)).toEqual([]);
  });

  it('a holder that is a flow child is kept (its parent would run without it): falls back to reject', async () => {
    // The slot-set path (unique across queues) lets a unique job have a parent.
    const app = await start(clientSide('replace', { uniqueAcross: 'queues' }));
    const parents = new Queue(uniqueName('repl-parents'), bullOptions());
    const flows = new FlowProducer(bullOptions());
    onCleanup(async () => {
      await Promise.all([flows.close(), parents.close()]);
      await deleteNamespaces(redis, { queues: [parents.name] });
    });
    // A parent waiting for a child of its own queue, then given a unique child.
    const tree = await flows.add({
      name: 'parent',
      queueName: parents.name,
      data: {},
      children: [{ name: 'plain', queueName: parents.name, data: {} }],
    });
    const parent = { id: tree.job.id!, queue: tree.job.queueQualifiedName };
    const child = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'child' }, { parent }));

    const dup = asDuplicate(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'second' }));
    expect(dup).toMatchObject({ strategy: 'reject', existingJobId: child.job.id });
    // Had it been removed, BullMQ would have dropped it from the parent's dependencies.
    expect(await app.queue.getJobState(child.job.id!)).toBe('waiting');
    expect(await tree.job.getDependenciesCount()).toMatchObject({ unprocessed: 2 });
    expect(await tree.job.getState()).toBe('waiting-children');
  });

  it('lockLimit 2 with one holder running and one delayed: the delayed one is replaced, whichever lease ends first', async () => {
    const gates = new Gates().hold('running');
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId, lockLimit: 2 },
      handler: gates.handler,
    });
    // The delayed holder's lease ends an hour later than the running one's: the replace must look past the first.
    const delayed = asEnqueued(
      await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'later' }, { delay: 3_600_000 }),
    );
    const running = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'running' }));
    await gates.started('running');

    const third = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'third' }));
    expect(third.replacedJobId).toBe(delayed.job.id);
    expect(await app.queue.getJob(delayed.job.id!)).toBeUndefined();
    expect(await app.queue.getJobState(running.job.id!)).toBe('active');
    const holders = await redis.zrange(`${app.prefix}:{${third.digest}}:queued`, '0', '-1');
    expect(holders.sort()).toEqual([running.job.id, third.job.id].sort());
    expect(await app.service.deadSet.size()).toBe(0);

    // The next one replaces the waiting replacement, never the running holder.
    const fourth = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', tag: 'fourth' }));
    expect(fourth.replacedJobId).toBe(third.job.id);
    expect(await app.queue.getJobState(running.job.id!)).toBe('active');
    gates.release('running');
    await app.finished(running.job);
  });

  it('the semaphore path (lockLimit 2) replaces the oldest holder once both slots are taken', async () => {
    const app = await start(clientSide('replace', { lockLimit: 2 }));
    const one = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 1 }));
    const two = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 }));
    const three = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 3 }));
    expect(two.replacedJobId).toBeUndefined();
    expect([one.job.id, two.job.id]).toContain(three.replacedJobId);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
    const holders = await redis.zrange(`${app.prefix}:{${one.digest}}:queued`, '0', '-1');
    expect(holders.sort()).toEqual(
      [one.job.id, two.job.id, three.job.id].filter((id) => id !== three.replacedJobId).sort(),
    );
  });
});
