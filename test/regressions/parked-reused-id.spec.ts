// Review helper-160 (session 51), finding A: a step job's parked run-time slot is owned by (queue, job id). A parked job
// removed without the library, and its custom id given to a new job (BullMQ's usual way to reschedule a job: remove
// and add with the same jobId), left a slot whose owner looked live to the stale-parked check and to the reaper: the
// digest was refused (`log`: not run) for a day past the removed job's run time. Both now take a live job whose hash
// counts no step (`STEPS_FIELD`, written by every park) for another job than the parker (readParkerStanding).
import { describe, expect, it } from '@jest/globals';
import { DelayedError, Queue, type Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, runningKey, runtimeOwner, waitForParked } from '../support/locks.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { UniqueJobsReaper } from '../../lib/nest/unique-jobs.reaper.js';

describe('a parked step job removed, its custom id reused', () => {
  const { redis, start, keysOf, onCleanup } = useApps('rv51-reuse');

  it.each([
    ['the same data (remove + add again later: a reschedule), through a plain Queue', { id: 'a' }, false],
    ['other data, through a plain Queue', { id: 'b' }, false],
    ['the same data, through the guarded (injected) queue', { id: 'a' }, true],
  ])(
    '%s: a new job of the first digest runs once the old parked end passed',
    async (_label, reused, guarded) => {
      const ran: string[] = [];
      const lease = 200;
      const ref: { app?: TestApp } = {};
      const app = (ref.app = await start({
        module: { reaper: { interval: false, grace: 0 } },
        unique: {
          lock: 'while_executing',
          lockArgs: byId,
          jobName: 'sync',
          onConflict: 'log',
          runtimeLockLease: lease,
        },
        handler: async (job: Job<{ id: string; park?: boolean }>) => {
          ran.push(`${job.id}:${job.data.id}`);
          if (!job.data.park) return 'done';
          await job.updateData({ ...job.data, park: false });
          await job.moveToDelayed(Date.now() + 300, job.token);
          await ref.app!.queue.pause(); // the removed job is not delivered again
          throw new DelayedError();
        },
      }));
      const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
      const customId = uniqueName('report');
      await app.queue.add('sync', { id: 'a', park: true }, { jobId: customId });
      await waitForParked(redis, running, runtimeOwner(app, customId));
      const parkedAt = Date.now();
      const unguarded = new Queue(app.queue.name, bullOptions());
      onCleanup(() => unguarded.close());
      const producer = guarded ? app.queue : unguarded;
      await (await producer.getJob(customId))!.remove();
      // Added again under its id, to run later (an hour here).
      await producer.add('sync', reused, { jobId: customId, delay: 3_600_000 });
      await app.queue.resume();
      // Past the end the parked slot had before session 51 (due + runtimeLockLease).
      await waitFor('the former parked end to pass', () => Date.now() > parkedAt + 300 + lease + 500, 10_000);
      const reaper = app.moduleRef.get(UniqueJobsReaper);
      await reaper.run(); // the reaper does not help either (the owner's id names a live job)
      const next = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('next') });
      const result = await app.finished(next);
      const slot = await owners(redis, running);
      // Cleanup before asserting.
      await (await unguarded.getJob(customId))?.remove();
      await redis.del(running);
      expect({ result, ran, slot }).toEqual({ result: 'done', ran: [`${customId}:a`, `${next.id}:a`], slot: [] });
      expect((await keysOf(app)).filter((key) => !key.endsWith('{reaper}:leader'))).toEqual([]);
    },
    30_000,
  );
});
