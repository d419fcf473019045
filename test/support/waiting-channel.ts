import { afterAll, beforeAll } from '@jest/globals';
import { Queue, type QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { WaitersChannel } from '../../lib/idempotency/waiters-channel.js';
import { WaitingDuplicates } from '../../lib/idempotency/waiting-duplicates.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { bullOptions, deleteKeys, openQueueEvents, redisClient, scanKeys, uniqueName } from './redis.js';

const quiet = { log: () => undefined, warn: () => undefined, error: () => undefined };

/** A holder's {@link WaitingDuplicates} and another process's side of the channel, over a queue of their own. */
export interface WaitingChannelFixture {
  client: Redis;
  queue: Queue;
  queueEvents: QueueEvents;
  /** The process holding keys: listens, remembers waiters, promotes them. */
  holder: WaitingDuplicates;
  /** Another process's side of the channel: only announces. */
  announcer: WaitersChannel;
}

/** Sets up a {@link WaitingChannelFixture} for a describe block (beforeAll) and removes all of it (afterAll). */
export function useWaitingChannel(label: string): WaitingChannelFixture {
  const fixture = {} as WaitingChannelFixture;
  const keys = new UniqueJobsKeys(uniqueName(`${label}-uj`));
  beforeAll(async () => {
    const name = uniqueName(label);
    fixture.client = redisClient();
    fixture.queue = new Queue(name, bullOptions());
    fixture.queueEvents = await openQueueEvents(name);
    fixture.holder = new WaitingDuplicates(fixture.client, keys, quiet);
    await fixture.holder.listen();
    fixture.announcer = new WaitersChannel(fixture.client, keys, quiet, () => undefined);
  });
  afterAll(async () => {
    const { holder, queueEvents, queue, client } = fixture;
    await holder.close();
    await queueEvents.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await deleteKeys(client, await scanKeys(client, `${keys.prefix}:*`));
    await client.quit();
  });
  return fixture;
}
