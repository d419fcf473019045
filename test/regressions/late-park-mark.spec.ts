// Review helper-163 (session 51): a step's mark (ujParked, awaited before its park) could land after the job's next
// delivery (the job due at once) had run its own step and parked under another digest: the late mark named the old
// digest, and the live job's parked slot was then judged another job's and given back by the next take — a duplicate
// ran beside it. The mark is now written only while the job's starts (BullMQ's `ats`) are the parking delivery's
// (markParked-1.lua); a delivery whose job started again parks nothing. The hold on the first mark stands in for the
// awaits before it (attemptFailed, delayed(), job.getState()).
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, runningKey, runtimeOwner, waitForParked } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { BullJobReads } from '../../lib/redis/bull-job-reads.js';
import { PARKED_FIELD } from '../../lib/redis/keys.js';

type Data = { id: string; step: number };

describe('a late mark of an earlier delivery', () => {
  const { redis, start } = useApps('late-park-mark');
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('a live step job parked under the digest its later step moved to keeps that slot', async () => {
    const ran: string[] = [];
    const original = BullJobReads.prototype.markParked;
    let calls = 0;
    let secondDone = false;
    const marks: string[] = [];
    jest.spyOn(BullJobReads.prototype, 'markParked').mockImplementation(async function (
      this: BullJobReads,
      jobKey: string,
      digest: string,
      countStep: boolean,
      starts: number,
    ) {
      const n = ++calls;
      if (n === 1) await waitFor('the next delivery to mark', () => secondDone, 10_000);
      const result = await original.call(this, jobKey, digest, countStep, starts);
      marks.push(`${n}:${digest.slice(-6)}`);
      if (n === 2) secondDone = true;
      return result;
    });
    const app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      worker: { concurrency: 2 },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log', runtimeLockLease: 30_000 },
      handler: async (job: Job<Data>) => {
        ran.push(`${job.id}:${job.data.id}:${job.data.step}`);
        if (job.data.step === 0) {
          // Step 1: same digest, due again at once.
          await job.updateData({ ...job.data, step: 1 });
          await job.moveToDelayed(Date.now() + 20, job.token);
          throw new DelayedError();
        }
        if (job.data.step === 1) {
          // Step 2: data (digest) moves to b, next step in a minute.
          await job.updateData({ id: 'b', step: 2 });
          await job.moveToDelayed(Date.now() + 60_000, job.token);
          throw new DelayedError();
        }
        return 'done';
      },
    });
    const dA = digestOf(app, 'sync', { id: 'a' });
    const dB = digestOf(app, 'sync', { id: 'b' });
    const runningA = runningKey(app.prefix, dA);
    const runningB = runningKey(app.prefix, dB);
    const step = await app.queue.add('sync', { id: 'a', step: 0 }, { jobId: uniqueName('step') });
    await waitForParked(redis, runningB, runtimeOwner(app, step.id!));
    await waitFor('both marks', () => marks.length === 2, 10_000);
    const parkedIn = await redis.hget(`${app.queue.qualifiedName}:${step.id}`, PARKED_FIELD);
    const slotA = await owners(redis, runningA);
    // A duplicate of digest b while the step job waits (live, delayed) for its step 3 under b.
    const dup = await app.queue.add('sync', { id: 'b', step: 2 }, { jobId: uniqueName('dup') });
    await app.finished(dup).catch(() => undefined);
    const state = await step.getState();
    const slotB = await owners(redis, runningB);
    await (await app.queue.getJob(step.id!))?.remove();
    await redis.del(runningA, runningB);
    expect({ marks, parkedInIsB: parkedIn === dB, slotA, state, ran, slotB }).toEqual({
      marks: [`2:${dB.slice(-6)}`, `1:${dA.slice(-6)}`],
      parkedInIsB: true,
      slotA: [],
      state: 'delayed',
      ran: [`${step.id}:a:0`, `${step.id}:a:1`], // the duplicate refused (log)
      slotB: [step.id],
    });
  }, 40_000);
});
