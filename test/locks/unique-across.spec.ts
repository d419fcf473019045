// uniqueAcross: one digest for several job names ('names') or several queues ('queues').
import { describe, expect, it } from '@jest/globals';
import { digest, lockKey, type UniqueJobOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import {
  byId,
  dedupKey,
  digestOf,
  enqueuedJob,
  members,
  owners,
  queuedKey,
  runningKey,
  runtimeOwner,
} from '../support/locks.js';
import { bullOptions, prefixKeys, scanKeys, uniqueName } from '../support/redis.js';
import type { TestJob } from './helpers.js';

describe('uniqueAcross', () => {
  const { redis, start, keysOf } = useApps('ua');

  describe("'names'", () => {
    it('two job names with the same lock arguments collide on one queue', async () => {
      const a = await start({
        unique: { lock: 'until_executed', lockArgs: byId, uniqueAcross: 'names' },
        paused: true,
      });
      const charge = enqueuedJob(await a.service.enqueue(a.queue, 'charge', { id: 'u1' }));
      expect(await a.service.enqueue(a.queue, 'refund', { id: 'u1' })).toMatchObject({
        status: 'duplicate',
        existingJobId: charge.id,
      });
      const value = digestOf(a, 'charge', { id: 'u1' });
      expect(digestOf(a, 'refund', { id: 'u1' })).toBe(value);
      expect(value).toBe(
        digest({
          queue: a.queue.name,
          queuePrefix: bullOptions().prefix,
          name: 'anything',
          lockArgs: 'u1',
          uniqueAcross: 'names',
        }),
      );
      // Still one queue: the lock rides on BullMQ's deduplication key.
      expect(await keysOf(a)).toEqual([dedupKey(a.queue.name, value)]);
      expect(dedupKey(a.queue.name, value)).toBe(
        lockKey({
          queue: a.queue.name,
          queuePrefix: a.queue.opts.prefix,
          name: 'x',
          lockArgs: 'u1',
          uniqueAcross: 'names',
          prefix: a.prefix,
        }),
      );
      // Other lock arguments do not collide.
      const other = enqueuedJob(await a.service.enqueue(a.queue, 'refund', { id: 'u2' }));

      a.start();
      await Promise.all([a.finished(charge), a.finished(other)]);
      expect(await keysOf(a)).toEqual([]);
      enqueuedJob(await a.service.enqueue(a.queue, 'refund', { id: 'u1' }));
    });

    it('without it, two job names with the same lock arguments do not collide', async () => {
      const a = await start({ unique: { lock: 'until_executed', lockArgs: byId }, paused: true });
      const charge = enqueuedJob(await a.service.enqueue(a.queue, 'charge', { id: 'u1' }));
      const refund = enqueuedJob(await a.service.enqueue(a.queue, 'refund', { id: 'u1' }));
      expect(await keysOf(a)).toHaveLength(2);
      a.start();
      await Promise.all([a.finished(charge), a.finished(refund)]);
      expect(await keysOf(a)).toEqual([]);
    });

    it('while_executing: two job names with the same lock arguments never run at once', async () => {
      const gate = hold();
      const started = hold();
      const a = await start({
        unique: { lock: 'while_executing', lockArgs: byId, uniqueAcross: 'names' },
        worker: { concurrency: 2 },
        handler: async (job: TestJob) => {
          if (job.name === 'charge') {
            started.resolve();
            await gate.promise;
          }
          return job.name;
        },
      });
      const events = new EventLog(a);
      const charge = enqueuedJob(await a.service.enqueue(a.queue, 'charge', { id: 'u1' }));
      await started.promise;
      const refund = enqueuedJob(await a.service.enqueue(a.queue, 'refund', { id: 'u1' }));
      await expect(a.finished(refund)).resolves.toBeNull(); // completed without running
      expect(events.duplicates('server')).toEqual([
        expect.objectContaining({ jobId: refund.id, existingJobId: charge.id }),
      ]);
      gate.resolve();
      await expect(a.finished(charge)).resolves.toBe('charge');
      expect(await keysOf(a)).toEqual([]);
    });
  });

  describe("'queues'", () => {
    it('the same job on two queues collides on the semaphore key <prefix>:{digest}:queued', async () => {
      const prefix = uniqueName('ujt');
      const unique: UniqueJobOptions = { lock: 'until_executed', lockArgs: byId, uniqueAcross: 'queues' };
      const a = await start({ unique, module: { prefix }, paused: true });
      const b = await start({ unique, module: { prefix }, paused: true });
      const fromA = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
      const value = digestOf(a, 'sync', { id: 'u1' });
      expect(digestOf(b, 'sync', { id: 'u1' })).toBe(value);
      expect(await b.service.enqueue(b.queue, 'sync', { id: 'u1', n: 2 })).toMatchObject({
        status: 'duplicate',
        existingJobId: fromA.id,
      });
      expect(await prefixKeys(redis, prefix)).toEqual([queuedKey(prefix, value)]);
      expect(await owners(redis, queuedKey(prefix, value))).toEqual([fromA.id]);
      // No BullMQ deduplication key on either queue: a per-queue key could not see the other queue.
      expect(await scanKeys(redis, `${a.queue.qualifiedName}:de:*`)).toEqual([]);
      expect(await scanKeys(redis, `${b.queue.qualifiedName}:de:*`)).toEqual([]);
      expect(await b.queue.getJobCounts('waiting')).toEqual({ waiting: 0 });

      a.start();
      await a.finished(fromA);
      expect(await keysOf(a)).toEqual([]);
      const fromB = enqueuedJob(await b.service.enqueue(b.queue, 'sync', { id: 'u1', n: 3 }));
      expect(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 4 })).toMatchObject({
        status: 'duplicate',
        existingJobId: fromB.id,
      });
      b.start();
      await b.finished(fromB);
      expect(await keysOf(b)).toEqual([]);
    });

    it('without it, the same job on two queues does not collide', async () => {
      const prefix = uniqueName('ujt');
      const unique: UniqueJobOptions = { lock: 'until_executed', lockArgs: byId };
      const a = await start({ unique, module: { prefix }, paused: true });
      const b = await start({ unique, module: { prefix }, paused: true });
      const fromA = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
      const fromB = enqueuedJob(await b.service.enqueue(b.queue, 'sync', { id: 'u1' }));
      expect(digestOf(a, 'sync', { id: 'u1' })).not.toBe(digestOf(b, 'sync', { id: 'u1' }));
      a.start();
      b.start();
      await Promise.all([a.finished(fromA), b.finished(fromB)]);
      expect(await keysOf(a)).toEqual([]);
      expect(await keysOf(b)).toEqual([]);
    });

    it("['queues', 'names']: different job names on different queues collide", async () => {
      const prefix = uniqueName('ujt');
      const unique: UniqueJobOptions = { lock: 'until_executing', lockArgs: byId, uniqueAcross: ['queues', 'names'] };
      const a = await start({ unique, module: { prefix }, paused: true });
      const b = await start({ unique, module: { prefix }, paused: true });
      const charge = enqueuedJob(await a.service.enqueue(a.queue, 'charge', { id: 'u1' }));
      expect(await b.service.enqueue(b.queue, 'refund', { id: 'u1' })).toMatchObject({
        status: 'duplicate',
        existingJobId: charge.id,
      });
      a.start();
      await a.finished(charge);
      expect(await prefixKeys(redis, prefix)).toEqual([]);
      const refund = enqueuedJob(await b.service.enqueue(b.queue, 'refund', { id: 'u1' }));
      b.start();
      await b.finished(refund);
      expect(await keysOf(b)).toEqual([]);
    });

    /** Two queues on one prefix with a while_executing lock across them; a's handler holds until `gate` opens. */
    async function twoQueuesHoldingA(extra: Partial<UniqueJobOptions> = {}) {
      const prefix = uniqueName('ujt');
      const gate = hold();
      const started = hold();
      const unique = { lock: 'while_executing', lockArgs: byId, uniqueAcross: 'queues', ...extra } as UniqueJobOptions;
      const a = await start({
        unique,
        module: { prefix },
        handler: async () => {
          started.resolve();
          await gate.promise;
          return 'a';
        },
      });
      const b = await start({ unique, module: { prefix }, handler: async () => 'b' });
      return { prefix, gate, started, a, b, events: new EventLog(b) };
    }

    it('while_executing: the same job on two queues never runs at once', async () => {
      const { prefix, gate, started, a, b, events } = await twoQueuesHoldingA();
      const fromA = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
      await started.promise;
      const value = digestOf(a, 'sync', { id: 'u1' });
      // The owner names its queue: ids repeat across queues (see the next test).
      expect(await members(redis, runningKey(prefix, value))).toEqual([runtimeOwner(a, fromA.id!)]);
      const fromB = enqueuedJob(await b.service.enqueue(b.queue, 'sync', { id: 'u1' }));
      await expect(b.finished(fromB)).resolves.toBeNull(); // completed without running
      expect(b.runs).toEqual([]);
      // The same through a bulk enqueue.
      const [bulk] = await b.service.enqueueBulk(b.queue, [{ name: 'sync', data: { id: 'u1', n: 2 } }]);
      const fromBulk = enqueuedJob(bulk);
      await expect(b.finished(fromBulk)).resolves.toBeNull();
      expect(b.runs).toEqual([]);
      expect(events.duplicates('server')).toEqual([
        expect.objectContaining({ jobId: fromB.id, existingJobId: fromA.id }),
        expect.objectContaining({ jobId: fromBulk.id, existingJobId: fromA.id }),
      ]);
      gate.resolve();
      await expect(a.finished(fromA)).resolves.toBe('a');
      expect(await prefixKeys(redis, prefix)).toEqual([]);
      // With the holder gone, the job on the other queue runs.
      const again = enqueuedJob(await b.service.enqueue(b.queue, 'sync', { id: 'u1' }));
      await expect(b.finished(again)).resolves.toBe('b');
      expect(await prefixKeys(redis, prefix)).toEqual([]);
    });

    // Job ids repeat across queues: BullMQ numbers each queue's jobs from 1, a job scheduler's ids are the same on every
    // queue, callers choose ids. A job of another queue with the holder's id once re-entered the holder's slot and ran.
    it('while_executing: a job of another queue with the same id as the holder is not taken for it', async () => {
      const { prefix, gate, started, a, b, events } = await twoQueuesHoldingA({ onConflict: 'log' });
      const fromA = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }, { jobId: 'same-id' }));
      await started.promise;
      const fromB = enqueuedJob(await b.service.enqueue(b.queue, 'sync', { id: 'u1' }, { jobId: 'same-id' }));
      expect(fromB.id).toBe(fromA.id);
      await expect(b.finished(fromB)).resolves.toBeNull(); // completed without running
      expect(b.runs).toEqual([]);
      expect(events.duplicates('server')).toEqual([
        expect.objectContaining({ jobId: 'same-id', existingJobId: 'same-id', queue: b.queue.name }),
      ]);
      const value = digestOf(a, 'sync', { id: 'u1' });
      expect(await members(redis, runningKey(prefix, value))).toEqual([runtimeOwner(a, 'same-id')]);
      gate.resolve();
      await expect(a.finished(fromA)).resolves.toBe('a');
      expect(await prefixKeys(redis, prefix)).toEqual([]);
    });
  });
});
