// A worker takes an until_executing job's lock back after a failed attempt, so the retry never waits unlocked. When the
// handler moved the job on itself first (moveToDelayed + DelayedError, as the idempotency layer does for a key in
// progress), the job can run again on another worker, and even end, before that re-take lands (a command that waited
// out a reconnection: the fault-injection fleet found a deduplication key left held by a completed job). The re-take
// must then take nothing: BullMQ has finished the job, or another attempt (whose start released the lock) runs it, and
// a lock taken for it would refuse every later job of the digest. Both paths; on the slot-set path a lock across
// queues too (only an until_expired period outlives its job). The session-9 review found the last two cases.
import { describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { JobInterceptor, type UniqueJobOptions } from '../../lib/index.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, dedupKey, digestOf, owners, queuedKey } from '../support/locks.js';

const PATHS: [string, Partial<UniqueJobOptions>][] = [
  ['fast path (BullMQ deduplication key)', {}],
  ['general path (lockLimit 2, the library slot set)', { lockLimit: 2 }],
  ['general path (unique across queues)', { uniqueAcross: 'queues' }],
];

describe('a lock re-taken after its job moved on', () => {
  const { redis, start } = useApps('lateretake');

  /**
   * An until_executing app (two worker slots) whose job's first run moves it to delayed (due now), waits for `whenFirst`
   * (the second run, on the other slot, has started or ended), then throws DelayedError; the second run waits for
   * `whenSecond`, then returns. Resolves the app, a promise of the n-th process operation's end (hooks included) and
   * a way to resolve the gates.
   */
  async function lateRetake(extra: Partial<UniqueJobOptions>, handler: (first: boolean, job: Job) => Promise<unknown>) {
    let calls = 0;
    const ends = [deferred(), deferred()];
    let ended = 0;
    const options: Partial<TestAppOptions> = {
      unique: { lock: 'until_executing', lockArgs: byId, ...extra },
      worker: { concurrency: 2 },
      handler: (job: Job) => handler(++calls === 1, job),
    };
    const app: TestApp = await start(options);
    app.moduleRef.get(JobInterceptor).instrument({
      run: async (operation, _attributes, work) => {
        try {
          return await work(() => undefined);
        } finally {
          if (operation === 'process') ends[ended++]?.resolve();
        }
      },
    });
    return { app, ends: ends.map((end) => end.promise) };
  }

  async function expectUnlocked(app: TestApp) {
    const digest = digestOf(app, 'sync', { id: 'late' });
    expect(await redis.exists(dedupKey(app.queue.name, digest))).toBe(0);
    expect(await owners(redis, queuedKey(app.prefix, digest))).toEqual([]);
  }

  it.each(PATHS)(
    'until_executing, %s: the job ran again and completed before the re-take: nothing taken',
    async (_p, extra) => {
      const { app, ends } = await lateRetake(extra, async (first, job) => {
        if (!first) return 'second run';
        await job.moveToDelayed(Date.now(), job.token);
        await app.finished(job.id!); // the other slot ran it again and completed it
        throw new DelayedError();
      });
      const job = await app.queue.add('sync', { id: 'late' });
      await Promise.all(ends);
      expect(await job.getState()).toBe('completed');
      expect((await app.queue.getJob(job.id!))?.returnvalue as unknown).toBe('second run');
      await expectUnlocked(app);
      // The digest takes a new job.
      const next = await app.queue.add('sync', { id: 'late' });
      expect(next.id).not.toBe(job.id);
      expect(await app.finished(next)).toBe('second run');
    },
  );

  it.each(PATHS)(
    'until_executing, %s: the re-take lands while the job runs on another worker: nothing taken',
    async (_p, extra) => {
      const secondStarted = deferred();
      const { app, ends } = await lateRetake(extra, async (first, job) => {
        if (!first) {
          // Second run (its start released the lock): it ends only after the first attempt's re-take landed.
          secondStarted.resolve();
          await ends[0];
          return 'second run';
        }
        await job.moveToDelayed(Date.now(), job.token);
        await secondStarted.promise;
        throw new DelayedError();
      });
      // attempts > 1: with one attempt the first run's endsJob() asks BullMQ's retry rule of the job now active
      // elsewhere and answers 'fails', so no re-take is made at all.
      const job = await app.queue.add('sync', { id: 'late' }, { attempts: 3 });
      await Promise.all(ends);
      expect(await app.finished(job.id!)).toBe('second run');
      await expectUnlocked(app);
    },
  );
});
