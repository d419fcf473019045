// Producer-side review. P2: a queue's `defaultJobOptions.deduplication` (BullMQ merges it into every add) does not
// decide for a unique job: the library's lock does.
import { describe, expect, it } from '@jest/globals';
import type { DefaultJobOptions } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { byId } from '../support/locks.js';
import { bullPrefix } from '../support/redis.js';

describe('P2 a queue default deduplication does not decide for unique jobs', () => {
  const { redis, start } = useApps('prv-p2');
  // Not in BullMQ 6's DefaultJobOptions type, but merged into every add at run time (JavaScript, configuration files).
  const defaultJobOptions = { deduplication: { id: 'everything' } } as DefaultJobOptions;

  /** A definition, and how many jobs of one digest it admits (of the 3 added). */
  const cases: [string, UniqueJobOptions, number][] = [
    ['slot set (lockLimit 2)', { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, 2],
    ['slot set (until_expired)', { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 }, 1],
    ['fast path', { lock: 'until_executed', lockArgs: byId }, 1],
    ['no enqueue lock (while_executing)', { lock: 'while_executing', lockArgs: byId }, 3],
  ];

  it.each(cases)(
    '%s: jobs of other digests are added, a digest admits as many jobs as its lock allows',
    async (_, unique, holders) => {
      const app = await start({ unique, paused: true, queueOptions: { defaultJobOptions } });
      const statuses = [];
      for (const id of ['a', 'b']) statuses.push((await app.service.enqueue(app.queue, 'sync', { id })).status);
      const [bulked] = await app.queue.addBulk([{ name: 'sync', data: { id: 'c' } }]);
      for (let i = 0; i < 2; i++) statuses.push((await app.service.enqueue(app.queue, 'sync', { id: 'a' })).status);
      const tail = [2, 3].map((n) => (holders >= n ? 'enqueued' : 'duplicate'));
      expect(statuses).toEqual(['enqueued', 'enqueued', ...tail]);
      const waiting = await app.queue.getJobs(['waiting']);
      expect(waiting.map((job) => (job.data as { id: string }).id).sort()).toEqual([
        ...Array<string>(holders).fill('a'),
        'b',
        'c',
      ]);
      expect(waiting.map((job) => job.id)).toContain(bulked.id);
      expect(await redis.exists(`${bullPrefix()}:${app.queue.name}:de:everything`)).toBe(0);
    },
  );
});
