// BullMQ 6 opens a connection given as `{ url }`; the library, which reuses BullMQ's connection options, must open the
// same server: else its locks live on another Redis than the jobs (127.0.0.1:6379 by default), and the reaper, seeing
// no job behind them, releases live locks. On a Redis server of the suite's own, named only by its URL.
import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import type { Job, Queue } from 'bullmq';
import { UniqueJob, UniqueJobsModule } from '../lib/index.js';
import { UNIQUE_JOBS_REDIS } from '../lib/nest/unique-jobs.constants.js';
import { PrivateRedis } from './support/private-redis.js';
import { uniqueName } from './support/redis.js';

const server = await PrivateRedis.start();
afterAll(() => server.stop());

describe('a connection given as { url }', () => {
  it('the library opens the server the URL names, where BullMQ keeps the jobs', async () => {
    const name = uniqueName('url');
    const prefix = uniqueName('ujurl');
    @Processor(name, { autorun: false })
    @UniqueJob({ lock: 'until_executed', lockLimit: 2, lockArgs: (data: { id: string }) => data.id })
    class UrlProcessor extends WorkerHost {
      async process(job: Job): Promise<unknown> {
        return job.data;
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: { url: `${server.url}/0` } }),
        BullModule.registerQueue({ name }),
        UniqueJobsModule.forRoot({ prefix, logger: false }),
      ],
      providers: [UrlProcessor],
    }).compile();
    await moduleRef.init();
    try {
      const queue = moduleRef.get<Queue>(getQueueToken(name));
      const job = await queue.add('sync', { id: 'u1' });
      // The general-path lock (lockLimit 2) is a key under the library's prefix: on the URL's server, with the job.
      expect(await server.admin.exists(`bull:${name}:${job.id}`)).toBe(1);
      const locks = await server.admin.keys(`${prefix}:*`);
      expect(locks.filter((key) => key.endsWith(':queued'))).toHaveLength(1);
      const { client } = moduleRef.get<{ client: { options: { port?: number } } }>(UNIQUE_JOBS_REDIS);
      expect(client.options.port).toBe(server.port);
    } finally {
      await moduleRef.close();
      await server.admin.flushall();
    }
  });
});
