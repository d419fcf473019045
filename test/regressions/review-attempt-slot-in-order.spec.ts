// Review of session 46 (helper-146; releaseAttemptSlot-2.lua): a general-path slot released at the end of an attempt
// goes on the worker's connection (by source, unanswered once the connection is known to reach the library's server,
// awaited before that) ahead of BullMQ's moveToFinished: the slot is free when BullMQ records the end, success and
// failure for good alike.
import { describe, expect, it, jest } from '@jest/globals';
import { LockStore } from '../../lib/locks/lock-store.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, enqueuedJob, queuedKey } from '../support/locks.js';
import type { TestJob } from '../locks/helpers.js';

describe('review: general-path slot released on the worker connection at the end of an attempt', () => {
  const { redis, start } = useApps('rvio');

  it('success and failure for good, after the worker connection is known to be on the same server', async () => {
    const spy = jest.spyOn(LockStore.prototype, 'releaseAttemptSlot');
    try {
      const a = await start({
        unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
        handler: async (job: TestJob) => {
          if (job.data.fail) throw new Error('always');
        },
      });
      let inOrder = 0;
      for (let i = 0; i < 12; i++) {
        const id = `io${i}`;
        const fail = i % 3 === 2;
        const job = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id, fail }));
        if (fail) await expect(a.finished(job)).rejects.toThrow('always');
        else await a.finished(job);
        // BullMQ recorded the end: the release sent before it ran first.
        expect({
          i,
          left: await redis.zrange(queuedKey(a.prefix, digestOf(a, 'sync', { id, fail })), '0', '-1'),
        }).toEqual({
          i,
          left: [],
        });
        const call = spy.mock.calls.at(-1)!;
        expect(typeof call[3]).toBe('string'); // the attempt's token
        if (call[4] !== undefined) inOrder++;
      }
      expect(spy).toHaveBeenCalledTimes(12);
      expect(inOrder).toBe(12); // each on the worker's connection, the first ones once its server was known
    } finally {
      spy.mockRestore();
    }
  });
});
