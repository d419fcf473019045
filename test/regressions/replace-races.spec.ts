import { describe, expect, it } from '@jest/globals';
import type { Job, JobsOptions } from 'bullmq';
import { LockStore } from '../../lib/locks/lock-store.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { asEnqueued, byId } from '../support/locks.js';
import { redisClient } from '../support/redis.js';
import { workerOf } from '../conflicts/helpers.js';

/**
 * `replace` checks that the holder never started, then removes it: a worker may take it, run it and finish it in
 * between, and BullMQ removes a finished job as it removes a waiting one. Such a holder ran: it was not replaced.
 */
describe('replace racing with a holder that runs to its end (hostile review)', () => {
  const { start, keysOf } = useApps('replrace');

  /**
   * Enqueues the holder, then a replacement whose removal waits for the holder to run: to its end, or until `ran`
   * (subscribed before the worker starts) resolves.
   */
  async function raced(
    app: TestApp,
    opts: JobsOptions = {},
    ran: (holder: Job) => Promise<unknown> = (holder) => app.finished(holder).catch(() => undefined),
  ) {
    const first = asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: 1 }, opts));
    const requireWritable = LockStore.prototype.requireWritable;
    let raced = false;
    // Asked just before the removal, after the holder's state was read.
    LockStore.prototype.requireWritable = async function (this: LockStore, ...args) {
      if (!raced) {
        raced = true;
        const done = ran(first.job);
        app.start();
        await done;
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

  /** The new job ran after the holder, which is not reported as replaced, and no key is left. */
  async function expectRanBoth(app: TestApp, events: EventLog, second: { job: Job; replacedJobId?: string }) {
    await app.finished(second.job);
    expect(app.runs.map((job) => job.data as unknown)).toEqual([
      { id: 'a', n: 1 },
      { id: 'a', n: 2 },
    ]);
    expect(second.replacedJobId).toBeUndefined();
    expect(events.of('replaced')).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
  }

  it('a holder that completed meanwhile is not reported as replaced; the new job is enqueued', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
    });
    const events = new EventLog(app);
    const { second } = await raced(app);
    await expectRanBoth(app, events, second);
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
    await expectRanBoth(app, events, second);
  });

  it('a holder removed as it completed (removeOnComplete) is not reported as replaced', async () => {
    const app = await start({
      unique: { lock: 'until_executed', onConflict: 'replace', lockArgs: byId },
      paused: true,
    });
    const events = new EventLog(app);
    const { first, second } = await raced(app, { removeOnComplete: true });
    expect(await app.queue.getJob(first.job.id!)).toBeUndefined();
    await expectRanBoth(app, events, second);
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
    // The holder runs its first attempt, fails, and waits for its retry (delayed): BullMQ's worker reports the failed
    // attempt once it has moved the job back.
    const failedOnce = (holder: Job) =>
      new Promise<void>((resolve) =>
        workerOf(app).on('failed', (job) => {
          if (job?.id === holder.id) resolve();
        }),
      );
    const { first, second } = await raced(app, { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } }, failedOnce);
    expect(await app.queue.getJobState(first.job.id!)).not.toBe('active');
    await expectRanBoth(app, events, second);
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
