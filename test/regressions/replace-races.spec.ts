import { describe, expect, it } from '@jest/globals';
import type { JobsOptions } from 'bullmq';
import { LockStore } from '../../lib/locks/lock-store.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { asEnqueued, byId } from '../support/locks.js';
import { redisClient } from '../support/redis.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `replace` checks that the holder never started, then removes it: a worker may take it, run it and finish it in
 * between, and BullMQ removes a finished job as it removes a waiting one. Such a holder ran: it was not replaced.
 */
describe('replace racing with a holder that runs to its end (hostile review)', () => {
  const { start, keysOf } = useApps('replrace');

  /** Enqueues the holder, then a replacement whose removal waits for the holder to run to its end. */
  async function raced(app: TestApp, opts: JobsOptions = {}) {
    const first = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 1 }, opts));
    const requireWritable = LockStore.prototype.requireWritable;
    let raced = false;
    // Asked just before the removal, after the holder's state was read.
    LockStore.prototype.requireWritable = async function (this: LockStore, ...args) {
      if (!raced) {
        raced = true;
        app.start();
        await app.finished(first.job).catch(() => undefined);
      }
      return requireWritable.apply(this, args);
    };
    try {
      const second = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 }));
      expect(raced).toBe(true);
      return { first, second };
    } finally {
      LockStore.prototype.requireWritable = requireWritable;
    }
  }

  it('a holder that completed meanwhile is not reported as replaced; the new job is enqueued', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
    });
    const events = new EventLog(app);
    const { second } = await raced(app);
    await app.finished(second.job);
    expect(app.runs.map((job) => job.data as unknown)).toEqual([
      { id: 'a', n: 1 },
      { id: 'a', n: 2 },
    ]);
    expect(second.replacedJobId).toBeUndefined();
    expect(events.of('replaced')).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
  });

  it('a holder that failed for good meanwhile is not reported as replaced', async () => {
    const app = await start({
      unique: { lock: 'until_executing', onConflict: 'replace', lockArgs: byId },
      paused: true,
      handler: async (job) => {
        if ((job.data as { n: number }).n === 1) throw new Error('boom');
      },
    });
    const events = new EventLog(app);
    const { second } = await raced(app);
    await app.finished(second.job);
    expect(second.replacedJobId).toBeUndefined();
    expect(events.of('replaced')).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
  });

  it('a holder removed as it completed (removeOnComplete) is not reported as replaced', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
    });
    const events = new EventLog(app);
    const { first, second } = await raced(app, { removeOnComplete: true });
    expect(await app.queue.getJob(first.job.id!)).toBeUndefined();
    await app.finished(second.job);
    expect(app.runs).toHaveLength(2);
    expect(second.replacedJobId).toBeUndefined();
    expect(events.of('replaced')).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
  });

  it('a holder that ran an attempt meanwhile and waits for its retry is not reported as replaced', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
      handler: async (job) => {
        if ((job.data as { n: number }).n === 1) throw new Error('boom');
      },
    });
    const events = new EventLog(app);
    const first = asEnqueued(
      await app.service.enqueue(
        app.queue,
        'price',
        { id: 'a', n: 1 },
        { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      ),
    );
    const requireWritable = LockStore.prototype.requireWritable;
    let raced = false;
    // Just before the removal: the holder runs its first attempt, fails, and waits for its retry (delayed).
    LockStore.prototype.requireWritable = async function (this: LockStore, ...args) {
      if (!raced) {
        raced = true;
        app.start();
        while ((await app.queue.getJobState(first.job.id!)) !== 'delayed') await sleep(5);
      }
      return requireWritable.apply(this, args);
    };
    let second;
    try {
      second = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 }));
    } finally {
      LockStore.prototype.requireWritable = requireWritable;
    }
    expect(raced).toBe(true);
    await app.finished(second.job);
    expect(app.runs.map((job) => job.data as unknown)).toEqual([
      { id: 'a', n: 1 },
      { id: 'a', n: 2 },
    ]);
    expect(second.replacedJobId).toBeUndefined();
    expect(events.of('replaced')).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
  });

  it('a queue whose event stream keeps nothing (streams.events.maxLen 0) still reports the job it replaced', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
    });
    // BullMQ trims its events to `maxLenEvents` with each one it writes (`MAXLEN ~ 0`: none kept), the removal's too.
    const client = redisClient();
    try {
      await client.hset(`${app.queue.qualifiedName}:meta`, 'opts.maxLenEvents', 0);
      const events = new EventLog(app);
      const first = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 1 }));
      expect(await client.xlen(`${app.queue.qualifiedName}:events`)).toBe(0);
      const second = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 2 }));
      expect(second.replacedJobId).toBe(first.job.id);
      expect(events.of('replaced')).toHaveLength(1);
      expect(await app.queue.getJob(first.job.id!)).toBeUndefined();
      app.start();
      await app.finished(second.job);
      expect(app.runs.map((job) => job.data as unknown)).toEqual([{ id: 'a', n: 2 }]);
      expect(await keysOf(app)).toEqual([]);
    } finally {
      await client.quit();
    }
  });
});
