// A delivery waiting for an idempotency key announces itself on a Redis channel, then looks at the record once more
// and promotes itself if the holder settled it meanwhile. When its look came before the settle and its announcement
// reached the holder's process after it (the channel slower than the store), nobody woke it: it waited for the
// holder's whole lease. Seen in CI as a step job's own next delivery (SQL store, concurrency 2) that met its claim a
// moment before the step handed it over, then waited 30 s. The holder's process now remembers the keys it settled in
// the last 2 s and wakes a delivery announced for one of them at once.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { WaitersChannel } from '../../lib/idempotency/waiters-channel.js';
import { WaitingDuplicates } from '../../lib/idempotency/waiting-duplicates.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { bullOptions, deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { queueEvent } from '../support/wait.js';

const quiet = { log: () => undefined, warn: () => undefined, error: () => undefined };

describe('a waiting delivery announced just after its holder settled the key', () => {
  const name = uniqueName('late-announcement');
  const keys = new UniqueJobsKeys(uniqueName('late-announcement-uj'));
  let client: Redis;
  let queue: Queue;
  let queueEvents: QueueEvents;
  let holder: WaitingDuplicates;
  let announcer: WaitersChannel;

  beforeAll(async () => {
    client = redisClient();
    queue = new Queue(name, bullOptions());
    queueEvents = new QueueEvents(name, bullOptions());
    await queueEvents.waitUntilReady();
    holder = new WaitingDuplicates(client, keys, quiet);
    await holder.listen();
    // Another process's side of the channel: only announces.
    announcer = new WaitersChannel(client, keys, quiet, () => undefined);
  });
  afterAll(async () => {
    await holder.close();
    await queueEvents.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await deleteKeys(client, await scanKeys(client, `${keys.prefix}:*`));
    await client.quit();
  });

  it('is woken at once by the process that settled the key, not after the lease', async () => {
    const recordId = 'record-1';
    // The waiting delivery, delayed for the holder's lease (ten minutes).
    const waiting = await queue.add('charge', {}, { delay: 10 * 60_000 });
    holder.holding(recordId, queue);
    holder.settled(recordId); // no waiter announced yet: nobody to wake
    const promoted = queueEvent(queueEvents, 'waiting', waiting.id!);
    await announcer.announce({ recordId, queue: queue.qualifiedName, jobId: waiting.id });
    await promoted;
    expect(await queue.getJobState(waiting.id!)).toBe('waiting');
  });

  it('leaves a delivery announced for a key settled long ago (or never held here) to its delay', async () => {
    const waiting = await queue.add('charge', {}, { delay: 10 * 60_000 });
    await announcer.announce({ recordId: 'record-never-held', queue: queue.qualifiedName, jobId: waiting.id });
    // The announcement is handled before this process's next message on the channel: one sent after it.
    const heardAfter = queue.add('charge', {}, { delay: 10 * 60_000 });
    holder.holding('record-2', queue);
    holder.settled('record-2');
    const marker = await heardAfter;
    const promoted = queueEvent(queueEvents, 'waiting', marker.id!);
    await announcer.announce({ recordId: 'record-2', queue: queue.qualifiedName, jobId: marker.id });
    await promoted;
    expect(await queue.getJobState(waiting.id!)).toBe('delayed');
  });
});
