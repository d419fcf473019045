// An enqueue that gives up waiting for Redis (`enqueueTimeout`, RedisUnavailableError) leaves nothing behind in the
// process. It used to leave a reaction on the promise of the connection's next `ready`, which stays pending for as long
// as the outage lasts: every failed enqueue kept its closure, its timer and its rejected promise, ~1.35 KB each
// (100,000 failed `queue.add` calls against an unreachable Redis: heap 20 MB → 156 MB), a producer that keeps
// receiving work through a long outage grew until it ran out of memory. Both waits are covered: a queue whose connection
// never got through (its first connection), and one that was ready and lost its server (its next `ready`).
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisUnavailableError } from '../../lib/index.js';
import { RedisAvailability } from '../../lib/redis/redis-availability.js';
import { PrivateRedis } from '../support/private-redis.js';
import { uniqueName } from '../support/redis.js';

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const WAITS = 500;
const silent = { log: () => undefined, warn: () => undefined, error: () => undefined };

const server = await PrivateRedis.start();
afterAll(() => server.stop());

/** Asks `availability` for the queue's connection `WAITS` times; how many of the given-up waits are still reachable. */
async function retainedAfterTimeouts(availability: RedisAvailability, queue: Queue): Promise<number> {
  const refs: WeakRef<Promise<void>>[] = [];
  const outcomes: Promise<unknown>[] = [];
  for (let i = 0; i < WAITS; i++) {
    const wait = availability.ready(queue);
    expect(wait).toBeDefined();
    refs.push(new WeakRef(wait!));
    outcomes.push(
      wait!.then(
        () => 'ready',
        (error: unknown) => error,
      ),
    );
  }
  const errors = await Promise.all(outcomes);
  expect(errors.every((error) => error instanceof RedisUnavailableError)).toBe(true);
  outcomes.length = 0;
  errors.length = 0;
  await sleep(0); // WeakRef targets are kept until the end of the job that made them
  gc();
  return refs.filter((ref) => ref.deref() !== undefined).length;
}

/**
 * A queue on the private server, its errors (reconnect attempts) ignored; `disconnectTimeout` as in
 * test/support/private-redis.ts (it is closed while its server is down).
 */
function queueOnServer(): Queue {
  const queue = new Queue(uniqueName('bounds-out'), {
    connection: {
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: null,
      retryStrategy: () => 50,
      disconnectTimeout: 200,
    },
  });
  queue.on('error', () => undefined);
  return queue;
}

describe('bounds: enqueues that gave up waiting for Redis', () => {
  it('a queue whose server went away keeps nothing of the waits that timed out', async () => {
    const availability = new RedisAvailability(silent, 1);
    const queue = queueOnServer();
    availability.watch(queue);
    const client = await (queue.getBackend() as unknown as { client: Promise<Redis> }).client;
    await sleep(0); // the watch learns of the client a few promise reactions later
    expect(availability.ready(queue)).toBeUndefined(); // ready: nothing to wait for
    const lost = new Promise((resolve) => client.once('close', resolve));
    await server.kill();
    await lost;
    try {
      expect(await retainedAfterTimeouts(availability, queue)).toBeLessThan(WAITS / 10);
    } finally {
      await server.relaunch();
      await queue.close();
    }
  });

  it('a queue whose connection never got through keeps nothing of the waits that timed out', async () => {
    await server.kill();
    const availability = new RedisAvailability(silent, 1);
    const queue = queueOnServer();
    try {
      availability.watch(queue);
      expect(await retainedAfterTimeouts(availability, queue)).toBeLessThan(WAITS / 10);
    } finally {
      await server.relaunch();
      await queue.close();
    }
  });
});
