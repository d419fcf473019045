// The subscriber that wakes the deliveries waiting for a key in progress: a start that failed (Redis down at bootstrap
// past `maxRetriesPerRequest`, no offline queue on a connection not yet up, a connection closed under it) is
// forgotten, and the next key this process holds starts it again. It used to be kept as started for the life of the
// process: every waiting duplicate then waited for its holder's whole lease. The fault is injected on the library's own
// client: the SUBSCRIBE of its first duplicate (the subscriber's connection) fails.
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LoggerService } from '@nestjs/common';
import type { IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { captureLogger } from '../support/events.js';
import type { TestApp } from '../support/app.js';
import type { Deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { redisClient } from '../support/redis.js';
import { queueEvent, waitFor } from '../support/wait.js';

/**
 * Counts the SUBSCRIBEs of the connections duplicated from `client` that succeed; `failFirst`: the first connection's
 * fails (as one sent on a connection closed under it).
 */
function watchSubscribes(client: Redis, failFirst: boolean): { failed: () => number; subscribed: () => number } {
  const duplicate = client.duplicate.bind(client);
  let made = 0;
  let failed = 0;
  let subscribed = 0;
  client.duplicate = (...args: Parameters<Redis['duplicate']>) => {
    const connection = duplicate(...args);
    const subscribe = connection.subscribe.bind(connection) as (...channels: string[]) => Promise<unknown>;
    const first = made++ === 0;
    connection.subscribe = (async (...channels: string[]) => {
      if (first && failFirst) {
        failed++;
        throw new Error('Connection is closed.');
      }
      const answer = await subscribe(...channels);
      subscribed++;
      return answer;
    }) as Redis['subscribe'];
    return connection;
  };
  return { failed: () => failed, subscribed: () => subscribed };
}

describe('the subscriber of waiting duplicates after a failed start', () => {
  const { start } = useApps('outage-subscribe');
  // The library's client of each test, quit after the apps that use it are closed (it does not close a client it is given).
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const client of clients.splice(0)) await client.quit();
  });

  /**
   * A holder (its handler held), then a duplicate of its key that waits (delayed), then the holder let go: the
   * duplicate is woken and replays the holder's result.
   */
  async function holderAndWaiter(app: TestApp, started: Deferred, gate: Deferred, subscribed: () => number) {
    const holder = await app.queue.add('sync', { id: 'k' });
    await started.promise;
    // Holding the key started the subscriber (again).
    await waitFor('a subscription', () => subscribed() === 1);
    const delayed = queueEvent(app.queueEvents, 'delayed', '2');
    const duplicate = await app.queue.add('sync', { id: 'k' });
    expect(duplicate.id).toBe('2');
    await delayed;
    gate.resolve();
    expect(await app.finished(holder)).toEqual({ by: holder.id });
    // Woken when the holder settled the key (its lease has ~10 minutes left): the holder's result, replayed.
    expect(await app.finished(duplicate)).toEqual({ by: holder.id });
    expect(app.runs.map((job) => job.id)).toEqual([holder.id]);
  }

  /** An app whose handler holds every run until `gate`, on the library's client `client`. */
  function startHeld(client: Redis, logger?: LoggerService) {
    const started = hold();
    const gate = hold();
    const app = start({
      module: { connection: client, ...(logger ? { logger } : {}) },
      // A lease far longer than the test's timeout: a duplicate nobody wakes would wait it out.
      idempotency: { key: (job: IdempotencyJob<{ id: string }>) => job.data.id, lease: 600_000 },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        started.resolve();
        await gate.promise;
        return { by: job.id };
      },
    });
    return { app, started, gate };
  }

  it('is started again by the next key held, and wakes a waiting duplicate when the holder settles', async () => {
    const client = redisClient();
    clients.push(client);
    const fault = watchSubscribes(client, true);
    const { logger, lines } = captureLogger();
    const held = startHeld(client, logger);
    const app = await held.app;
    // The start at bootstrap failed.
    await waitFor('the failed subscribe', () => lines.warn.some((line) => line.includes('could not subscribe')));
    expect(fault.failed()).toBe(1);
    await holderAndWaiter(app, held.started, held.gate, fault.subscribed);
    expect(fault.failed()).toBe(1);
  });

  it('subscribes once connected on a client without an offline queue', async () => {
    const client = redisClient({ enableOfflineQueue: false });
    clients.push(client);
    await waitFor('the client ready', () => client.status === 'ready');
    const watch = watchSubscribes(client, false);
    const held = startHeld(client);
    await holderAndWaiter(await held.app, held.started, held.gate, watch.subscribed);
  });
});
