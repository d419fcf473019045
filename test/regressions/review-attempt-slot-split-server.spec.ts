// Review of session 46 (helper-146; releaseAttemptSlot-2.lua). forRoot accepts a `connection` to another Redis server
// than the queues' (another run id: only logged as an error, "a server of your choice"). The general-path slot set
// lives on the library's server; BullMQ's job lock on the queues'. The first build of the checked release ran its
// script on the library's connection when the worker's was not known to reach that server: it read
// `<queue>:<id>:lock` there, found none, and never released the slot (nor did `finished`: the bound lock counted it
// released), so each digest of a lockLimit queue filled up with completed jobs until the reaper freed them. The checked
// release now goes only on a worker connection that reaches the library's server; else one ZREM, as before.
// Two servers of the file's own; nothing on the shared one.
import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import { QueueEvents, type Queue } from 'bullmq';
import { UniqueJobsModule, UniqueJobsService } from '../../lib/index.js';
import { processorClass } from '../support/app.js';
import { captureLogger } from '../support/events.js';
import { byId } from '../support/locks.js';
import { PrivateRedis } from '../support/private-redis.js';
import { uniqueName } from '../support/redis.js';

const queues = await PrivateRedis.start();
const library = await PrivateRedis.start();
afterAll(async () => {
  await queues.stop();
  await library.stop();
});

describe('review: general-path slot released at the end of an attempt, library on another server (logged only)', () => {
  it('an until_executed job (lockLimit 2) that completed gives its slot back', async () => {
    const name = uniqueName('split');
    const prefix = uniqueName('ujsplit');
    const { logger, lines } = captureLogger();
    const SplitProcessor = processorClass(
      { queue: name, unique: { lock: 'until_executed', lockLimit: 2, lockArgs: byId } },
      [],
    );
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: { host: '127.0.0.1', port: queues.port } }),
        BullModule.registerQueue({ name }),
        UniqueJobsModule.forRoot({ prefix, logger, connection: { host: '127.0.0.1', port: library.port } }),
      ],
      providers: [SplitProcessor],
    }).compile();
    await moduleRef.init();
    const events = new QueueEvents(name, { connection: { host: '127.0.0.1', port: queues.port } });
    try {
      await events.waitUntilReady();
      // The configuration is allowed: logged, not fatal.
      const logged = [...lines.log, ...lines.warn, ...lines.error];
      expect(logged.some((line) => line.includes('reaches another Redis server'))).toBe(true);
      const queue = moduleRef.get<Queue>(getQueueToken(name));
      const service = moduleRef.get(UniqueJobsService);
      for (const round of [1, 2, 3]) {
        const result = await service.enqueue(queue, 'sync', { id: 'u1' });
        expect({ round, status: result.status }).toEqual({ round, status: 'enqueued' });
        if (result.status !== 'enqueued') break;
        await result.job.waitUntilFinished(events, 10_000);
        // The job completed: its slot is given back (the slot set, on the library's server, is empty).
        const slotSets = (await library.admin.keys(`${prefix}:*`)).filter((key) => key.endsWith(':queued'));
        const held = await Promise.all(slotSets.map((key) => library.admin.zrange(key, '0', '-1')));
        expect({ round, held: held.flat() }).toEqual({ round, held: [] });
      }
    } finally {
      await events.close();
      await moduleRef.close();
      await queues.admin.flushall();
      await library.admin.flushall();
    }
  }, 30_000);
});
