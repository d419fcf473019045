// Options changed across a rolling deploy (review 87): what holds, pinned. Two apps on one queue and one library
// prefix stand for the old build (a producer whose worker never fetches) and the new one (its worker runs every job).
// What the docs say of such changes (docs/how-locks-move.md, "Options changed between deploys", and
// docs/operations.md, "Changing options across deploys") is what these tests check.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, dedupKey, digestOf, enqueuedJob, owners, queuedKey, runningKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';

/** The reaper is off: what the job's own end does is what is checked. */
const NO_REAPER = { reaper: { interval: false as const } };

interface Data {
  id: string;
  region?: string;
}

describe('options changed across a deploy: what holds', () => {
  const { redis, start } = useApps('cfgheld');

  async function deploy(before: UniqueJobOptions, after: Partial<TestAppOptions>) {
    const prefix = uniqueName('cfgheldp');
    const old = await start({ unique: before, paused: true, module: { prefix, ...NO_REAPER } });
    const neu = await start({
      queue: old.queue.name,
      handler: async (job: Job) => (job.data as Data).id,
      paused: true,
      ...after,
      module: { prefix, ...NO_REAPER },
    });
    return { old, neu };
  }

  it('H1 until_executed → while_executing: an old queued job keeps its enqueue lock until it ends on the new build (the old producers still refuse its duplicate meanwhile), then nothing is left', async () => {
    const gate = deferred();
    const running = deferred();
    const { old, neu } = await deploy(
      { lock: 'until_executed', lockArgs: byId },
      {
        unique: { lock: 'while_executing', lockArgs: byId },
        handler: async (job: Job) => {
          running.resolve();
          await gate.promise;
          return (job.data as Data).id;
        },
      },
    );
    const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'h1' }));
    const digest = digestOf(old, 'sync', { id: 'h1' });
    expect(digestOf(neu, 'sync', { id: 'h1' })).toBe(digest);
    neu.start();
    await running.promise;
    expect(await owners(redis, runningKey(neu.prefix, digest))).toEqual([job.id]);
    expect(await old.service.enqueue(old.queue, 'sync', { id: 'h1' })).toMatchObject({
      status: 'duplicate',
      existingJobId: job.id,
    });
    gate.resolve();
    expect(await neu.finished(job)).toBe('h1');
    expect(await redis.exists(dedupKey(neu.queue.name, digest), runningKey(neu.prefix, digest))).toBe(0);
  });

  it('H2 lockArgs changed (until_executed, lockTtl): an old job releases the lock of the digest it was enqueued under, read from the job, not recomputed with the new lockArgs', async () => {
    const { old, neu } = await deploy(
      { lock: 'until_executed', lockArgs: byId, lockTtl: 60_000 },
      { unique: { lock: 'until_executed', lockArgs: (data: Data) => [data.id, data.region], lockTtl: 60_000 } },
    );
    const data = { id: 'h2', region: 'eu' };
    const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', data));
    const oldDigest = digestOf(old, 'sync', data);
    const newDigest = digestOf(neu, 'sync', data);
    expect(newDigest).not.toBe(oldDigest);
    // The two builds do not see each other's locks: the new producer admits the same data beside the old job.
    const beside = enqueuedJob(await neu.service.enqueue(neu.queue, 'sync', data));
    neu.start();
    expect(await neu.finished(job)).toBe('h2');
    expect(await neu.finished(beside)).toBe('h2');
    expect(await redis.exists(dedupKey(neu.queue.name, oldDigest), dedupKey(neu.queue.name, newDigest))).toBe(0);
    expect(await old.service.enqueue(old.queue, 'sync', data)).toMatchObject({ status: 'enqueued' });
  });

  it('H3 lockLimit 1 → 2: the old job (a deduplication key) is not counted among the new slots; every lock is released by its job', async () => {
    const { old, neu } = await deploy(
      { lock: 'until_executed', lockArgs: byId },
      { unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } },
    );
    const first = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'h3' }));
    const second = await neu.service.enqueue(neu.queue, 'sync', { id: 'h3' });
    const third = await neu.service.enqueue(neu.queue, 'sync', { id: 'h3' });
    expect([second.status, third.status]).toEqual(['enqueued', 'enqueued']);
    expect(await neu.service.enqueue(neu.queue, 'sync', { id: 'h3' })).toMatchObject({ status: 'duplicate' });
    const digest = digestOf(neu, 'sync', { id: 'h3' });
    neu.start();
    for (const job of [first, enqueuedJob(second), enqueuedJob(third)]) expect(await neu.finished(job)).toBe('h3');
    expect(await redis.exists(dedupKey(neu.queue.name, digest))).toBe(0);
    expect(await owners(redis, queuedKey(neu.prefix, digest))).toEqual([]);
  });

  it('H4 @UniqueJob removed: an old job runs as a plain job and BullMQ deletes its (TTL-less) deduplication key at its end', async () => {
    const { old, neu } = await deploy({ lock: 'until_executing', lockArgs: byId }, {});
    const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'h4' }));
    const digest = digestOf(old, 'sync', { id: 'h4' });
    neu.start();
    expect(await neu.finished(job)).toBe('h4');
    expect(await redis.exists(dedupKey(neu.queue.name, digest))).toBe(0);
    expect(await old.service.enqueue(old.queue, 'sync', { id: 'h4' })).toMatchObject({ status: 'enqueued' });
  });

  it('H5 until_executing, lockTtl removed: an old job releases its deduplication key (with its TTL) at its start', async () => {
    const gate = deferred();
    const running = deferred();
    const { old, neu } = await deploy(
      { lock: 'until_executing', lockArgs: byId, lockTtl: 60_000 },
      {
        unique: { lock: 'until_executing', lockArgs: byId },
        handler: async (job: Job) => {
          running.resolve();
          await gate.promise;
          return (job.data as Data).id;
        },
      },
    );
    const job = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'h5' }));
    const digest = digestOf(old, 'sync', { id: 'h5' });
    neu.start();
    await running.promise;
    expect(await redis.get(dedupKey(neu.queue.name, digest))).toBeNull();
    const next = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'h5' }));
    gate.resolve();
    expect(await neu.finished(job)).toBe('h5');
    expect(await neu.finished(next)).toBe('h5');
    expect(await redis.exists(dedupKey(neu.queue.name, digest))).toBe(0);
  });
});
