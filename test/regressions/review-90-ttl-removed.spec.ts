// Review 90: `lockTtl` removed across a deploy (until_executed). A job the old build added holds BullMQ's deduplication
// key with a TTL (lockTtl + delay). c9f915b made the new build release that key at the job's end (the job's stored
// deduplication TTL says it must), but the new build never moves the key's TTL when the job's run time moves: its
// `retime` and the worker's retry-backoff path both look at the current options' `lockTtl` only. A job moved later
// (`job.changeDelay`, a retry backoff longer than the TTL left) loses its lock while it still waits: the key expires and
// a duplicate is admitted beside it (until_executed broken for every job enqueued before the deploy).
import { describe, expect, it } from '@jest/globals';
import { Job } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { byId, dedupKey, digestOf, enqueuedJob, queuedKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

const NO_REAPER = { reaper: { interval: false as const } };
const TTL = 60_000;
const LATER = 10 * 60_000;

describe('review 90: lockTtl removed, an old job moved later keeps its deduplication key while it waits', () => {
  const { redis, start } = useApps('rv90ttl');

  async function deploy(handler?: (job: Job) => Promise<unknown>, lockLimit = 1) {
    const prefix = uniqueName('rv90ttlp');
    const before: UniqueJobOptions = { lock: 'until_executed', lockArgs: byId, lockTtl: TTL, lockLimit };
    const after: UniqueJobOptions = { lock: 'until_executed', lockArgs: byId, lockLimit };
    const old = await start({ unique: before, paused: true, module: { prefix, ...NO_REAPER } });
    const neu = await start({
      queue: old.queue.name,
      unique: after,
      paused: true,
      ...(handler ? { handler } : {}),
      module: { prefix, ...NO_REAPER },
    });
    return { old, neu };
  }

  it('R1 job.changeDelay on the new build moves the TTL of the key the old job holds', async () => {
    const { old, neu } = await deploy();
    const added = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id: 'r1' }, { delay: 1_000 }));
    const digest = digestOf(old, 'sync', { id: 'r1' });
    const key = dedupKey(neu.queue.name, digest);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(TTL + 1_000);
    const job = (await Job.fromId(neu.queue, added.id!))!;
    await job.changeDelay(LATER); // through the new build's guarded queue
    // Today: left at lockTtl + 1 s; the key expires ~9 minutes before the job runs, and a duplicate is admitted.
    const pttl = await redis.pttl(key);
    expect(pttl === -1 || pttl > LATER).toBe(true);
    expect(await neu.service.enqueue(neu.queue, 'sync', { id: 'r1' })).toMatchObject({
      status: 'duplicate',
      existingJobId: added.id,
    });
    await job.remove();
  });

  /**
   * A job the old build added (with `lockTtl`) whose first run, on the new build (without), fails and waits for a retry
   * after a backoff far longer than `lockTtl`.
   */
  async function failedOnceWithBackoff(id: string, lockLimit: number) {
    let runs = 0;
    const { old, neu } = await deploy(async () => {
      runs++;
      throw new Error('first run fails');
    }, lockLimit);
    const backoff = { attempts: 2, backoff: { type: 'fixed', delay: LATER } };
    const added = enqueuedJob(await old.service.enqueue(old.queue, 'sync', { id }, backoff));
    const failedOnce = new Promise<void>((resolve) => neu.worker!.once('failed', () => resolve()));
    const started = () => {
      neu.start();
      return failedOnce.then(async () => {
        expect(runs).toBe(1);
        expect(await neu.queue.getJobState(added.id!)).toBe('delayed');
      });
    };
    const cleanUp = async () => {
      await neu.worker!.pause();
      await (await Job.fromId(neu.queue, added.id!))!.remove();
    };
    return { old, neu, added, started, cleanUp };
  }

  it('R2 a retry backoff on the new build (longer than the TTL left) keeps the old job locked until its retry', async () => {
    const { neu, started, cleanUp } = await failedOnceWithBackoff('r2', 1);
    const key = dedupKey(neu.queue.name, digestOf(neu, 'sync', { id: 'r2' }));
    await started();
    // The new build's worker follows the backoff (as the old build's did, lockTtl past the retry's run time). Today the
    // key keeps its add-time TTL: it expires ~9 minutes before the retry.
    await waitFor(
      'the key to follow the backoff',
      async () => {
        const pttl = await redis.pttl(key);
        return pttl === -1 || pttl > LATER;
      },
      3_000,
    );
    await cleanUp();
  });

  it('R3 the same on the general path: the slot the old job holds (lease lockTtl) follows a long retry backoff', async () => {
    const { old, added, started, cleanUp } = await failedOnceWithBackoff('r3', 2);
    const key = queuedKey(old.prefix, digestOf(old, 'sync', { id: 'r3' }));
    const leftMs = async () => {
      const [score, [seconds, micros]] = await Promise.all([redis.zscore(key, added.id!), redis.time()]);
      // The score's fraction is the slot's mark, not time: the lease ends at its whole ms.
      return score === null ? -1 : Math.floor(Number(score)) - (Number(seconds) * 1000 + Number(micros) / 1000);
    };
    expect(await leftMs()).toBeLessThanOrEqual(TTL);
    await started();
    // The slot's lease was lockTtl (the old build's): it would end ~9 minutes before the retry. The new build's worker
    // moves it past the retry's run time (its own lease, the 24 h default without lockTtl).
    await waitFor('the slot to follow the backoff', async () => (await leftMs()) > LATER, 3_000);
    await cleanUp();
  });
});
