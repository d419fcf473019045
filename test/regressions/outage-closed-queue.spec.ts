// An enqueue through the library on a queue whose connection was closed on purpose (`queue.add` after `app.close()`):
// it fails at once with ioredis' "Connection is closed.", as plain BullMQ's `add` does. It used to be taken for a
// connection not ready yet: the enqueue waited `enqueueTimeout`, then threw RedisUnavailableError ("not reachable").
import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import type { Queue } from 'bullmq';
import { defineUniqueJob, RedisUnavailableError, UniqueJobsModule } from '../../lib/index.js';
import {
  bullPrefix,
  bullRootOptions,
  closeBullConnection,
  deleteNamespaces,
  redisClient,
  uniqueName,
} from '../support/redis.js';

describe('an enqueue on a queue closed with its application', () => {
  const redis = redisClient();
  const queues: string[] = [];
  const prefixes: string[] = [];
  afterAll(async () => {
    await deleteNamespaces(redis, { queues, prefixes });
    await redis.quit();
  });

  /** Whatever `add` rejected with (or `undefined` when it resolved). */
  async function rejection(add: Promise<unknown>): Promise<Error | undefined> {
    try {
      await add;
      return undefined;
    } catch (error) {
      return error as Error;
    }
  }

  it('fails at once with "Connection is closed.", for a unique job and any other', async () => {
    const queueName = uniqueName('outage-closed');
    const prefix = uniqueName('outage-closedp');
    queues.push(queueName);
    prefixes.push(prefix);
    const job = defineUniqueJob<{ id: string }>({
      queue: queueName,
      jobName: 'sync',
      lock: 'until_executed',
      lockArgs: (data) => [data.id],
    });
    const bullRoot = bullRootOptions();
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot(bullRoot),
        BullModule.registerQueue({ name: queueName }),
        // An enqueue that waited for the closed connection would fail after this, with RedisUnavailableError.
        UniqueJobsModule.forRoot({ logger: false, prefix, jobs: [job], enqueueTimeout: 5_000 }),
      ],
    }).compile();
    await moduleRef.init();
    const queue = moduleRef.get<Queue>(getQueueToken(queueName));
    await queue.waitUntilReady();
    await moduleRef.close();
    await closeBullConnection(bullRoot.connection);
    for (const name of ['sync', 'other']) {
      const error = await rejection(queue.add(name, { id: '1' }));
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(RedisUnavailableError);
      expect(error?.message).toMatch(/^Connection is closed\./);
    }
    // Nothing was added.
    expect(await redis.exists(`${bullPrefix()}:${queueName}:1`)).toBe(0);
  });
});
