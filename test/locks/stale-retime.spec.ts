// A move of a job's run time reaches its lock after the job was read: a retry's backoff (the runner read the job when
// it ran), a guarded changeDelay or promote (read around BullMQ's move). A job removed and added again with the same id
// in between holds a lock of its own under that id; a retime that set it from the old job's run time ended it before
// the new job ran (a duplicate admitted then). Found by a review (helper-143). A retime now never ends a hold sooner
// unless it is sure the hold is the one it read: a slot's mark tells, read before the move.
import { describe, expect, it, jest } from '@jest/globals';
import { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { SoonerEnd } from '../../lib/locks/lock-marks.js';
import { LockStore } from '../../lib/locks/lock-store.js';
import { UNIQUE_JOBS_DEFINITIONS, UNIQUE_JOBS_REDIS } from '../../lib/nest/unique-jobs.constants.js';
import type { JobDefinitions } from '../../lib/options/job-definitions.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, dedupKey, digestOf, enqueuedJob, owners, queuedKey } from '../support/locks.js';
import { openQueueEvents, redisClient, uniqueName } from '../support/redis.js';

describe('a retime crossed by the job’s removal and a new job of the same id', () => {
  const { redis, start, onCleanup } = useApps('stale-retime');

  /**
   * The app's lock store's `retime` (a slot set's: `slots`, BullMQ's deduplication key's: `deduplication`), which first
   * runs `meanwhile` (once), then goes on; `done` when that call answered.
   */
  const crossOnce = (app: TestApp, on: 'slots' | 'deduplication', meanwhile: () => Promise<void>) => {
    const lock = app.moduleRef.get<JobDefinitions>(UNIQUE_JOBS_DEFINITIONS).find(app.queue.name, 'sync')!.enqueueLock!;
    const store = (lock as unknown as { store: LockStore }).store;
    const target = (on === 'slots' ? store : store.deduplication) as unknown as {
      retime: (...args: unknown[]) => Promise<boolean>;
    };
    const original = target.retime.bind(target);
    const done = deferred<boolean>();
    let crossed = false;
    target.retime = async (...args) => {
      if (crossed) return original(...args);
      crossed = true;
      await meanwhile();
      const answer = await original(...args);
      done.resolve(answer);
      return answer;
    };
    onCleanup(async () => void (target.retime = original));
    return done.promise;
  };

  /** A paused app whose lock is a slot set with a lockTtl, and the slot key of the job with `id`. */
  const pausedSlotApp = async (id: string) => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 5_000, lockLimit: 2 },
      paused: true,
    });
    const key = queuedKey(app.prefix, digestOf(app, 'sync', { id }));
    onCleanup(async () => void (await redis.del(key)));
    return { app, key };
  };

  /** Removes the job and adds one with the same id and data, due in 90 s; resolves the new job's lock score/TTL. */
  const replaceWithLaterJob = async (app: TestApp, job: Job, read: () => Promise<number>) => {
    expect(await app.queue.remove(job.id!)).toBe(1);
    enqueuedJob(await app.service.enqueue(app.queue, 'sync', job.data, { jobId: job.id!, delay: 90_000 }));
    return read();
  };

  /** A job of id 'same-id' whose failed attempt BullMQ retries after a 1 s backoff. */
  const retriedJob = async (app: TestApp, id: string) => {
    const opts = { jobId: 'same-id', attempts: 2, backoff: { type: 'fixed', delay: 1_000 } };
    return enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id }, opts));
  };

  it('a retry’s backoff retime leaves the slot of a job added again with the id as it was', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 5_000, lockLimit: 2 },
      handler: async () => {
        throw new Error('attempt failed');
      },
    });
    const key = queuedKey(app.prefix, digestOf(app, 'sync', { id: 's1' }));
    onCleanup(async () => void (await redis.del(key)));
    let newJobs = 0;
    const job = await retriedJob(app, 's1');
    let before = 0;
    const retimed = crossOnce(app, 'slots', async () => {
      before = await replaceWithLaterJob(app, job, async () => Number(await redis.zscore(key, 'same-id')));
      newJobs++;
    });
    expect(await retimed).toBe(false); // the old job's backoff would end the new job's slot 89 s sooner: not made
    expect(newJobs).toBe(1);
    expect(Number(await redis.zscore(key, 'same-id'))).toBe(before);
    expect(await owners(redis, key)).toEqual(['same-id']);
  });

  it('the same on the fast path: the deduplication key’s TTL is not cut to the old job’s backoff', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 5_000 },
      handler: async () => {
        throw new Error('attempt failed');
      },
    });
    const key = dedupKey(app.queue.name, digestOf(app, 'sync', { id: 's2' }));
    const job = await retriedJob(app, 's2');
    const retimed = crossOnce(app, 'deduplication', async () => {
      await replaceWithLaterJob(app, job, () => redis.pttl(key));
    });
    expect(await retimed).toBe(false);
    expect(await redis.get(key)).toBe('same-id');
    expect(await redis.pttl(key)).toBeGreaterThan(60_000); // its own 90 s + lockTtl, not the old job's 1 s + lockTtl
  });

  it('a guarded promote read before a new job of the id took its slot leaves that slot as it was', async () => {
    const { app, key } = await pausedSlotApp('s3');
    const job = enqueuedJob(
      await app.service.enqueue(app.queue, 'sync', { id: 's3' }, { jobId: 'same-id', delay: 60_000 }),
    );
    let before = 0;
    const retimed = crossOnce(app, 'slots', async () => {
      before = await replaceWithLaterJob(app, job, async () => Number(await redis.zscore(key, 'same-id')));
    });
    await job.promote();
    expect(await retimed).toBe(false);
    expect(Number(await redis.zscore(key, 'same-id'))).toBe(before);
  });

  // Review (helper-145): the deduplication key's script checked only its value (the id, the same for the new job), so
  // a job replaced between the guard's read after the move and the script had its TTL cut to the old job's run time.
  it('fast path: a job replaced just before the guarded promote’s retime keeps its TTL (the script reads its timestamp)', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 5_000 }, paused: true });
    const key = dedupKey(app.queue.name, digestOf(app, 'sync', { id: 's5' }));
    const job = enqueuedJob(
      await app.service.enqueue(app.queue, 'sync', { id: 's5' }, { jobId: 'same-id', delay: 60_000 }),
    );
    const retimed = crossOnce(app, 'deduplication', async () => {
      expect(await replaceWithLaterJob(app, job, () => redis.pttl(key))).toBeGreaterThan(90_000);
    });
    await job.promote();
    expect(await retimed).toBe(false);
    expect(await redis.get(key)).toBe('same-id');
    expect(await redis.pttl(key)).toBeGreaterThan(60_000); // not the old job's promote + lockTtl (~5 s)
  });

  // Review (helper-145): the guard's compare of the job read after the move with the one read before (the timestamp).
  it('fast path: a job replaced between BullMQ’s promote and the guard’s read after it keeps its TTL', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 5_000 }, paused: true });
    const key = dedupKey(app.queue.name, digestOf(app, 'sync', { id: 's6' }));
    const job = enqueuedJob(
      await app.service.enqueue(app.queue, 'sync', { id: 's6' }, { jobId: 'same-id', delay: 60_000 }),
    );
    const fromId = Job.fromId.bind(Job);
    let reads = 0;
    const spy = jest.spyOn(Job, 'fromId').mockImplementation(async (queue, id) => {
      // The guard's reads: before the move (1), after it (2); another process replaces the job just before the second.
      if (id === 'same-id' && ++reads === 2) await replaceWithLaterJob(app, job, () => redis.pttl(key));
      return fromId(queue, id);
    });
    onCleanup(async () => void spy.mockRestore());
    await job.promote();
    expect(reads).toBeGreaterThanOrEqual(2);
    expect(await redis.get(key)).toBe('same-id');
    expect(await redis.pttl(key)).toBeGreaterThan(60_000);
  });

  // Review (helper-145): the read before the move went out on a library connection that was not ready (ioredis queues
  // it until it reconnects), holding BullMQ's move up; the guarded removal skips its read then, and so does the move.
  it('a library connection that is not ready does not hold the guarded promote’s move up', async () => {
    const connection = redisClient();
    onCleanup(async () => void (await connection.quit()));
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, lockTtl: 5_000, lockLimit: 2 },
      paused: true,
      module: { connection },
    });
    const { client } = app.moduleRef.get<{ client: Redis }>(UNIQUE_JOBS_REDIS);
    expect(client).toBe(connection);
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 's7' }, { delay: 60_000 }));
    const events = await openQueueEvents(app.queue.name);
    onCleanup(async () => void (await events.close()));
    const waiting = new Promise<void>((resolve) =>
      events.on('waiting', ({ jobId }) => {
        if (jobId === job.id) resolve();
      }),
    );
    const status = client.status;
    client.status = 'reconnecting'; // as ioredis marks a connection it is re-establishing
    const promoted = job.promote().catch(() => undefined);
    try {
      // BullMQ moved the job (before the fix that never came while the connection was away: bounded, so that a failure
      // ends the test rather than leaving the connection marked away).
      let bound: NodeJS.Timeout | undefined;
      const moved = await Promise.race([
        waiting.then(() => true),
        new Promise<boolean>((resolve) => (bound = setTimeout(() => resolve(false), 15_000))),
      ]);
      clearTimeout(bound);
      expect(moved).toBe(true);
      expect(await app.queue.getJobState(job.id!)).toBe('waiting');
    } finally {
      client.status = status;
      // The retime after the move waits for the connection, as it did before: let what ioredis queued go (rejected).
      (client as unknown as { flushQueue(error: Error, options: object): void }).flushQueue(new Error('not ready'), {
        offlineQueue: true,
        commandQueue: false,
      });
    }
    await promoted;
  });

  it('a guarded promote of the job read still ends its slot sooner', async () => {
    const { app, key } = await pausedSlotApp('s4');
    const job = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 's4' }, { delay: 60_000 }));
    const before = Number(await redis.zscore(key, job.id!));
    await job.promote();
    const after = Number(await redis.zscore(key, job.id!));
    expect(after).toBeLessThan(before - 50_000);
    expect(after % 1).toBe(before % 1); // its mark kept
  });
});

describe('retimeLock: a sooner end only for the slot read', () => {
  const { redis, onCleanup } = useApps('retime-lock');

  it('a later end always; a sooner one only with the lease read before (its mark)', async () => {
    const store = new LockStore(new RedisScripts(redis));
    const key = queuedKey(uniqueName('retime-lock-uj'), `v1:${'ef'.repeat(32)}`);
    onCleanup(async () => void (await redis.del(key)));
    expect((await store.acquireSlot(key, 'X', 60_000, 2, 'new')).acquired).toBe(true);
    const read = (await store.leaseOf(key, 'X'))!;
    const score = async () => Number(await redis.zscore(key, 'X'));
    const sooner = async (how: SoonerEnd) => store.retime(key, 'X', 1_000, how);

    expect(await sooner('never')).toBe(false);
    expect(await score()).toBe(Number(read));
    const otherMark = String(Math.floor(Number(read)) + ((Math.round((Number(read) % 1) * 1024) % 1022) + 1) / 1024);
    expect(await sooner({ leaseRead: otherMark })).toBe(false);
    expect(await store.retime(key, 'X', 120_000, 'never')).toBe(true); // later: made, mark kept
    expect((await score()) % 1).toBe(Number(read) % 1);
    expect(await sooner({ leaseRead: read })).toBe(true); // same mark, lease moved since: still the slot read
    expect((await score()) - Number(read)).toBeLessThan(0);

    // A slot without a mark (an earlier build's): a sooner end only with that very lease.
    const whole = String(Math.floor(await score()) + 30_000);
    await redis.zadd(key, whole, 'X');
    expect(await sooner({ leaseRead: String(Number(whole) - 1) })).toBe(false);
    expect(await sooner({ leaseRead: whole })).toBe(true);
    expect(await store.retime(key, 'nobody', 120_000, 'never')).toBe(false);
  });
});
