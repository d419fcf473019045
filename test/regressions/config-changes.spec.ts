// Options changed across a rolling deploy while jobs enqueued under the old options are still in Redis (review 87).
// Two apps on one queue and one library prefix stand for the old and the new build. A job carries the evidence of the
// enqueue lock it took (BullMQ's deduplication id on the fast path, the library's marker in its options on the slot
// set), and the worker must release that lock, whatever the enqueue lock the new options would take: else a lock the
// job took back on a retry outlives the job (BullMQ deletes a deduplication key at a job's end only for a job added
// with it) and refuses every later job of the digest until the reaper's pass.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { byId, dedupKey, digestOf, enqueuedJob, expiringKey, owners, queuedKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';

const seen = new Set<string>();
/** Fails the first run of every job (by its id), then returns the `id` of its data. */
const failOnce = async (job: Job) => {
  if (!seen.has(job.id!)) {
    seen.add(job.id!);
    throw new Error('first run fails');
  }
  return (job.data as { id: string }).id;
};

/** The reaper is off: what the job's own end does is what is checked (a reaper pass would hide a lock left behind). */
const NO_REAPER = { reaper: { interval: false as const } };

describe('options changed across a deploy: the new worker releases the lock an old job took', () => {
  const { redis, start } = useApps('cfgchg');

  /** The old build (producer only: its worker never fetches) and the new one (its worker runs every job). */
  async function deploy(before: UniqueJobOptions, after: UniqueJobOptions) {
    const prefix = uniqueName('cfgchgp');
    const old = await start({ unique: before, paused: true, module: { prefix, ...NO_REAPER } });
    const neu = await start({
      queue: old.queue.name,
      unique: after,
      handler: failOnce,
      paused: true,
      module: { prefix, ...NO_REAPER },
    });
    return { old, neu };
  }

  const changes: [string, UniqueJobOptions, UniqueJobOptions][] = [
    [
      'until_executed lockLimit 2 → 1',
      { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      { lock: 'until_executed', lockArgs: byId },
    ],
    [
      'until_executing lockLimit 2 → 1',
      { lock: 'until_executing', lockArgs: byId, lockLimit: 2 },
      { lock: 'until_executing', lockArgs: byId },
    ],
    [
      'until_and_while_executing lockLimit 2 → 1',
      { lock: 'until_and_while_executing', lockArgs: byId, lockLimit: 2 },
      { lock: 'until_and_while_executing', lockArgs: byId },
    ],
    [
      'until_expired → until_executed',
      { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 },
      { lock: 'until_executed', lockArgs: byId },
    ],
  ];

  it.each(changes)(
    'C1 %s: an old job (slot set) retried and completed under the new options leaves no lock; the digest takes a new job',
    async (_label, before, after) => {
      const { old, neu } = await deploy(before, after);
      const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'c1' }, { attempts: 2 }));
      const digest = digestOf(neu, 'sync', { id: 'c1' });
      expect(digestOf(old, 'sync', { id: 'c1' })).toBe(digest);
      neu.start();
      expect(await neu.finished(job)).toBe('c1');
      // Today the retry's re-take set BullMQ's deduplication key for a job BullMQ did not add with it: BullMQ leaves it
      // at the job's end, and the completed job refuses every later job of the digest (until the reaper's pass).
      expect(await redis.get(dedupKey(neu.queue.name, digest))).toBeNull();
      if (before.lock !== 'until_expired') expect(await owners(redis, queuedKey(neu.prefix, digest))).toEqual([]);
      else expect(await owners(redis, expiringKey(neu.prefix, digest))).toEqual([job.id]); // its period, by design
      const next = await neu.service.enqueue(neu.queue, 'sync', { id: 'c1' }, { attempts: 2 });
      expect(next).toMatchObject({ status: 'enqueued' });
      expect(await neu.finished(enqueuedJob(next))).toBe('c1');
    },
  );

  it.each([
    ['until_executed lockLimit 2 → 1', changes[0][1], changes[0][2]],
    ['until_executing lockLimit 2 → 1', changes[1][1], changes[1][2]],
  ] as const)(
    'C2 %s: an old job failed for good, put back by job.retry() on the new build, completes and leaves no lock',
    async (_label, before, after) => {
      const { old, neu } = await deploy(before, after);
      const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'c2' }));
      const digest = digestOf(neu, 'sync', { id: 'c2' });
      neu.start();
      await expect(neu.finished(job)).rejects.toThrow('first run fails');
      const failed = (await neu.queue.getJob(job.id!))!;
      await failed.retry(); // guarded: it takes its enqueue lock back before it moves
      expect(await neu.finished(job.id!)).toBe('c2');
      // Today the re-entry took BullMQ's deduplication key for a job BullMQ did not add with it: it outlives the job.
      expect(await redis.get(dedupKey(neu.queue.name, digest))).toBeNull();
      expect(await owners(redis, queuedKey(neu.prefix, digest))).toEqual([]);
      expect(await neu.service.enqueue(neu.queue, 'sync', { id: 'c2' })).toMatchObject({ status: 'enqueued' });
    },
  );

  it.each([
    ['until_executed', 'until_executed'],
    ['until_executing', 'until_executing'],
    ['until_and_while_executing', 'until_and_while_executing'],
  ] as const)(
    'C3 %s lockLimit 1 → 2 with lockTtl: the deduplication key (with its TTL) an old job took is released by its end on the new build',
    async (_label, lock) => {
      const { old, neu } = await deploy(
        { lock, lockArgs: byId, lockTtl: 60_000 },
        { lock, lockArgs: byId, lockTtl: 60_000, lockLimit: 2 },
      );
      const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'c3' }, { attempts: 2 }));
      const digest = digestOf(neu, 'sync', { id: 'c3' });
      expect(await redis.get(dedupKey(neu.queue.name, digest))).toBe(job.id);
      neu.start();
      expect(await neu.finished(job)).toBe('c3');
      // Today the new build releases a slot of its slot set, which the job never held: the key stays for its TTL, and
      // the old build's producers refuse every job of the digest until then.
      expect(await redis.get(dedupKey(neu.queue.name, digest))).toBeNull();
      expect(await owners(redis, queuedKey(neu.prefix, digest))).toEqual([]);
      expect(await old.service.enqueue(old.queue, 'sync', { id: 'c3' })).toMatchObject({ status: 'enqueued' });
    },
  );

  it('C4 until_executed, lockTtl removed: the deduplication key (with its TTL) an old job took is released by its end on the new build', async () => {
    const { old, neu } = await deploy(
      { lock: 'until_executed', lockArgs: byId, lockTtl: 60_000 },
      { lock: 'until_executed', lockArgs: byId },
    );
    const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'c4' }, { attempts: 2 }));
    const digest = digestOf(neu, 'sync', { id: 'c4' });
    neu.start();
    expect(await neu.finished(job)).toBe('c4');
    // Today BullMQ deletes only a key without TTL at the job's end, and the new build sends nothing: the key stays for
    // its TTL and the old build's producers refuse the digest until then.
    expect(await redis.get(dedupKey(neu.queue.name, digest))).toBeNull();
    expect(await old.service.enqueue(old.queue, 'sync', { id: 'c4' })).toMatchObject({ status: 'enqueued' });
  });

  const toWhileExecuting: [string, UniqueJobOptions][] = [
    [
      'until_executed with lockTtl (a deduplication key with a TTL)',
      { lock: 'until_executed', lockArgs: byId, lockTtl: 60_000 },
    ],
    ['until_executed lockLimit 2 (a slot set)', { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }],
    ['until_executing lockLimit 2 (a slot set)', { lock: 'until_executing', lockArgs: byId, lockLimit: 2 }],
  ];

  it.each(toWhileExecuting)(
    'C5 %s → while_executing: an old job releases the enqueue lock it took by its end on the new build',
    async (_label, before) => {
      const { old, neu } = await deploy(before, {
        lock: 'while_executing',
        lockArgs: byId,
        lockLimit: before.lockLimit,
      });
      const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'c5' }, { attempts: 2 }));
      const digest = digestOf(old, 'sync', { id: 'c5' });
      neu.start();
      expect(await neu.finished(job)).toBe('c5');
      // Today a while_executing build binds no enqueue lock to the job: the key stays for its TTL, the slot until the
      // reaper's pass (or its 24-hour lease), and the old build's producers refuse the digest until then.
      expect(await redis.get(dedupKey(neu.queue.name, digest))).toBeNull();
      expect(await owners(redis, queuedKey(neu.prefix, digest))).toEqual([]);
      expect(await old.service.enqueue(old.queue, 'sync', { id: 'c5' })).toMatchObject({ status: 'enqueued' });
    },
  );
});
