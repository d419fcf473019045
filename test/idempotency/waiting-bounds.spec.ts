// The deliveries remembered as waiting for a key in progress are a bounded structure: a delivery that announces itself
// again (every re-delivery does) is kept once, and at most 1,000 are kept per key (the others wait for the holder's
// lease, which bounds every wait anyway), and at most 100,000 in all. Settling a key promotes what was kept; a delivery
// whose claim was answered is forgotten. Real Redis, a real BullMQ queue.
import { afterAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { WaitingDuplicates } from '../../lib/idempotency/waiting-duplicates.js';
import { recordIdOf } from '../../lib/idempotency/stored-key.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { bullOptions, deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('WaitingDuplicates: what it remembers is bounded', () => {
  const redis = redisClient();
  const publisher = redisClient();
  const prefix = uniqueName('ujwait');
  const queueName = uniqueName('waitbound');
  const queue = new Queue(queueName, bullOptions());
  const keys = new UniqueJobsKeys(prefix);
  const silent = { log: () => undefined, warn: () => undefined, error: () => undefined };
  const waiting = new WaitingDuplicates(redis, keys, silent);

  afterAll(async () => {
    await waiting.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await deleteKeys(redis, await scanKeys(redis, `*${prefix}*`));
    await Promise.all([redis.quit(), publisher.quit()]);
  });

  /** How many deliveries are remembered as waiting for `recordId` (the holder's list). */
  const remembered = (recordId: string): number =>
    (waiting as unknown as { held: Map<string, { waiters: Map<string, unknown> }> }).held.get(recordId)?.waiters.size ??
    0;

  /** Every delivery remembered, all keys together (the counter the global cap reads). */
  const total = (): number => (waiting as unknown as { remembered: number }).remembered;
  /** Remembers a delivery of this process as delayed for `recordId` (what `delay()` does before moving it). */
  const rememberDelayed = (recordId: string, jobId: string): void =>
    (waiting as unknown as { remember: (r: string, w: Queue, j: string, ms: number) => void }).remember(
      recordId,
      queue,
      jobId,
      600_000,
    );
  const settledMessage = (recordId: string) =>
    publisher.publish(keys.idempotencyWaitersChannel, JSON.stringify({ settled: recordId }));

  const announce = (recordId: string, jobId: string) =>
    publisher.publish(keys.idempotencyWaitersChannel, JSON.stringify({ recordId, queue: queue.qualifiedName, jobId }));

  it('a delivery announced 2,000 times is kept once; 1,500 distinct ones are capped at 1,000; settling promotes them', async () => {
    await waiting.listen();
    const recordId = recordIdOf('scope', 'bounded');
    waiting.holding(recordId, queue);
    const delayed = await queue.add('d', {}, { delay: 600_000 });

    const pipeline = publisher.pipeline();
    for (let i = 0; i < 2_000; i++) {
      pipeline.publish(
        keys.idempotencyWaitersChannel,
        JSON.stringify({ recordId, queue: queue.qualifiedName, jobId: delayed.id }),
      );
    }
    await pipeline.exec();
    // A marker announced last: once it is remembered, every announcement before it was heard (one connection, in order).
    await announce(recordId, 'marker-1');
    await waitFor('the marker to be heard', () => remembered(recordId) === 2);
    expect(remembered(recordId)).toBe(2);

    const more = publisher.pipeline();
    for (let i = 0; i < 1_500; i++) {
      more.publish(
        keys.idempotencyWaitersChannel,
        JSON.stringify({ recordId, queue: queue.qualifiedName, jobId: `other-${i}` }),
      );
    }
    await more.exec();
    await waitFor('the cap to be reached', () => remembered(recordId) === 1_000);
    // Heard after the cap: not kept (that delivery waits for the lease). A marker of another held key, announced after
    // it on the same connection, says when it was heard.
    const markerRecord = recordIdOf('scope', 'marker');
    waiting.holding(markerRecord, queue);
    await announce(recordId, 'after-the-cap');
    await announce(markerRecord, 'marker-2');
    await waitFor('the marker to be heard', () => remembered(markerRecord) === 1);
    expect(remembered(recordId)).toBe(1_000);

    expect(await delayed.getState()).toBe('delayed');
    waiting.settled(recordId);
    await waitFor('the kept delivery to be promoted', async () => (await delayed.getState()) === 'waiting');
    expect(remembered(recordId)).toBe(0);
  });

  it('a delivery whose claim was answered is forgotten: a later "settled" of its key does not promote it out of a delay it has since', async () => {
    await waiting.listen();
    const recordId = recordIdOf('scope', 'answered');
    const job = await queue.add('d', {}, { delay: 600_000 });
    rememberDelayed(recordId, job.id!);
    waiting.answered(recordId, queue, job.id!);
    await settledMessage(recordId);
    // Heard in order on one connection: once the marker is remembered, the "settled" before it was handled.
    const markerRecord = recordIdOf('scope', 'answered-marker');
    waiting.holding(markerRecord, queue);
    await announce(markerRecord, 'marker-3');
    await waitFor('the marker to be heard', () => remembered(markerRecord) === 1);
    expect(await job.getState()).toBe('delayed');
    waiting.settled(markerRecord);
    await job.remove();
  });

  it('remembers at most 100,000 deliveries in all, whatever the number of keys; settling frees the count', async () => {
    await waiting.listen();
    const base = total();
    const sentinel = recordIdOf('scope', 'sentinel');
    const job = await queue.add('d', {}, { delay: 600_000 });
    rememberDelayed(sentinel, job.id!);
    const held = Array.from({ length: 101 }, (_, i) => recordIdOf('scope', `many-${i}`));
    for (const recordId of held) waiting.holding(recordId, queue);
    for (let k = 0; k < 101; k++) {
      const pipeline = publisher.pipeline();
      for (let i = 0; i < 1_000; i++) {
        pipeline.publish(
          keys.idempotencyWaitersChannel,
          // Deliveries of another queue: settling tells their process (one message a key), no promotion here.
          JSON.stringify({ recordId: held[k], queue: `${queue.qualifiedName}-other`, jobId: `j-${i}` }),
        );
      }
      await pipeline.exec();
    }
    // The sentinel's "settled", sent last, promotes the real delayed job: every announcement before it was heard.
    await settledMessage(sentinel);
    await waitFor('the sentinel delivery to be promoted', async () => (await job.getState()) === 'waiting', 60_000);
    expect(total()).toBe(100_000 - 1);
    expect(remembered(held[100])).toBe(0);
    for (const recordId of held) waiting.settled(recordId);
    expect(total()).toBe(base);
    await job.remove();
  }, 90_000); // 101,000 messages, and a promotion awaited up to 60 s, on a loaded machine
});
