// The deliveries remembered as waiting for a key in progress are a bounded structure: a delivery that announces itself
// again (every re-delivery does) is kept once, and at most 1,000 are kept per key (the others wait for the holder's
// lease, which bounds every wait anyway). Settling a key promotes what was kept. Real Redis, a real BullMQ queue.
import { afterAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { recordIdOf, WaitingDuplicates } from '../../lib/idempotency/waiting-duplicates.js';
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
});
