// Review 90 (held): waits for a queue's connection share one reaction per connection (f7a6ef6). Pinned: every pending
// wait resolves once the connection is ready again, across repeated outages (3 rounds of 2,000 waits), and a wait that
// timed out stays rejected. (Not pinned: a queue closed during an outage leaves its pending waits to their
// enqueueTimeout — BullMQ marks its client 'end' without the 'end' event the waits listen for; see the review report.)
import { afterAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisUnavailableError } from '../../lib/index.js';
import { RedisAvailability } from '../../lib/redis/redis-availability.js';
import { PrivateRedis } from '../support/private-redis.js';
import { uniqueName } from '../support/redis.js';

const WAITS = 2_000;
const silent = { log: () => undefined, warn: () => undefined, error: () => undefined };

const server = await PrivateRedis.start();
afterAll(() => server.stop());

async function readyQueue(availability: RedisAvailability): Promise<{ queue: Queue; client: Redis }> {
  const queue = new Queue(uniqueName('rv90rw'), {
    connection: { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null, retryStrategy: () => 20 },
  });
  queue.on('error', () => undefined);
  availability.watch(queue);
  const client = await (queue.getBackend() as unknown as { client: Promise<Redis> }).client;
  await new Promise((resolve) => setImmediate(resolve));
  expect(availability.ready(queue)).toBeUndefined();
  return { queue, client };
}

async function outage(client: Redis): Promise<void> {
  const lost = new Promise((resolve) => client.once('close', resolve));
  await server.kill();
  await lost;
}

describe('review 90 (held): shared ready waits', () => {
  it('W1 every pending wait resolves once per recovery, over repeated outages; timed-out waits stay rejected', async () => {
    const availability = new RedisAvailability(silent, 600_000);
    const short = new RedisAvailability(silent, 1);
    const { queue, client } = await readyQueue(availability);
    short.watch(queue);
    await new Promise((resolve) => setImmediate(resolve));
    try {
      for (let round = 0; round < 3; round++) {
        await outage(client);
        const outcomes = Array.from({ length: WAITS }, () => availability.ready(queue)!.then(() => 'ready'));
        const gaveUp = Array.from({ length: 50 }, () =>
          short.ready(queue)!.then(
            () => 'ready',
            (e: unknown) => e,
          ),
        );
        expect((await Promise.all(gaveUp)).every((e) => e instanceof RedisUnavailableError)).toBe(true);
        const back = new Promise((resolve) => client.once('ready', resolve));
        await server.relaunch();
        await back;
        expect(new Set(await Promise.all(outcomes))).toEqual(new Set(['ready']));
        expect(availability.ready(queue)).toBeUndefined();
      }
    } finally {
      await queue.close();
    }
  });
});
