// Review helper-162 (session 51) of helper-160's fix A: a parked slot's parker was told by "the live job under the
// owner's id counts steps (ujSteps)". (1) The id reused by a job that itself parks, under another digest: the old slot
// still looked live, for a day. (2) A live step job whose count did not land (sent beside the park, its failure only
// reported) lost its slot to the next take: a duplicate ran beside it. Now every park first names its digest in the
// job's hash (ujParked, markParked-1.lua), awaited: a failed mark parks nothing (the slot is given back, the error
// reported), and a slot whose job names another digest is another job's. A hash with steps but no ujParked was parked by
// a build before session 51 (rolling deploy): taken for the parker.
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { DelayedError, Queue, type Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, runningKey, runtimeOwner, waitForParked } from '../support/locks.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { UniqueJobsReaper } from '../../lib/nest/unique-jobs.reaper.js';
import { BullJobReads } from '../../lib/redis/bull-job-reads.js';
import { PARKED_FIELD } from '../../lib/redis/keys.js';

type Data = { id: string; park?: boolean; wait?: number; pause?: boolean };

describe('who parked a run-time slot', () => {
  const { redis, start, onCleanup } = useApps('parker-identity');
  afterEach(() => {
    jest.restoreAllMocks();
  });

  const unique = (lease: number) => ({
    lock: 'while_executing' as const,
    lockArgs: byId,
    jobName: 'sync',
    onConflict: 'log' as const,
    runtimeLockLease: lease,
  });

  it('(1) custom id reused by a job that parks under another digest: a job of the first digest runs', async () => {
    const lease = 200;
    const ran: string[] = [];
    const ref: { app?: TestApp } = {};
    const app = (ref.app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: unique(lease),
      handler: async (job: Job<Data>) => {
        ran.push(`${job.id}:${job.data.id}:${job.data.park ? 1 : 2}`);
        if (!job.data.park) return 'done';
        await job.updateData({ ...job.data, park: false });
        await job.moveToDelayed(Date.now() + (job.data.wait ?? 300), job.token);
        if (job.data.pause) await ref.app!.queue.pause();
        throw new DelayedError();
      },
    }));
    const runningA = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const runningB = runningKey(app.prefix, digestOf(app, 'sync', { id: 'b' }));
    const customId = uniqueName('report');
    await app.queue.add('sync', { id: 'a', park: true, pause: true }, { jobId: customId });
    await waitForParked(redis, runningA, runtimeOwner(app, customId));
    const parkedAt = Date.now();
    const unguarded = new Queue(app.queue.name, bullOptions());
    onCleanup(() => unguarded.close());
    await (await unguarded.getJob(customId))!.remove();
    // The id given to a new job of other data, itself a step job: it runs step 1 and parks for an hour.
    await unguarded.add('sync', { id: 'b', park: true, wait: 3_600_000 }, { jobId: customId });
    await app.queue.resume();
    await waitForParked(redis, runningB, runtimeOwner(app, customId));
    await waitFor('the former parked end to pass', () => Date.now() > parkedAt + 300 + lease + 500, 10_000);
    await app.moduleRef.get(UniqueJobsReaper).run();
    const next = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('next') });
    const result = await app.finished(next);
    const slotA = await owners(redis, runningA);
    await (await unguarded.getJob(customId))?.remove();
    await redis.del(runningA, runningB);
    expect({ result, slotA, ranNext: ran.includes(`${next.id}:a:2`) }).toEqual({
      result: 'done',
      slotA: [],
      ranNext: true,
    });
  }, 30_000);

  it('(2) a slot parked by a build before session 51 (steps counted, no digest named): a duplicate does not run beside it', async () => {
    const lease = 200;
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: unique(lease),
      handler: async (job: Job<Data>) => {
        ran.push(`${job.id}:${job.data.park ? 1 : 2}`);
        if (!job.data.park) return 'done';
        await job.updateData({ ...job.data, park: false });
        await job.moveToDelayed(Date.now() + 3_000, job.token);
        throw new DelayedError();
      },
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const step = await app.queue.add('sync', { id: 'a', park: true }, { jobId: uniqueName('step') });
    await waitForParked(redis, running, runtimeOwner(app, step.id!));
    await redis.hdel(`${app.queue.qualifiedName}:${step.id}`, PARKED_FIELD);
    // A duplicate while the step job waits for its step 2 (live, delayed).
    const dup = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('dup') });
    await app.finished(dup);
    const state = await step.getState();
    const slot = await owners(redis, running);
    await (await app.queue.getJob(step.id!))?.remove();
    await redis.del(running);
    expect({ state, ran, slot }).toEqual({
      state: 'delayed',
      ran: [`${step.id}:1`], // the duplicate refused (log): it meets the live step job's parked slot
      slot: [step.id],
    });
  }, 30_000);

  it('(3) a mark that fails parks nothing: the slot is given back, the step job runs its step 2', async () => {
    const ran: string[] = [];
    jest
      .spyOn(BullJobReads.prototype, 'markParked')
      .mockImplementationOnce(() => Promise.reject(new Error('READONLY (injected): the mark failed')));
    const app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: unique(30_000),
      handler: async (job: Job<Data>) => {
        ran.push(`${job.id}:${job.data.park ? 1 : 2}`);
        if (!job.data.park) return 'done';
        await job.updateData({ ...job.data, park: false });
        await job.moveToDelayed(Date.now() + 300, job.token);
        throw new DelayedError();
      },
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const step = await app.queue.add('sync', { id: 'a', park: true }, { jobId: uniqueName('step') });
    await waitFor('the step to end', () => ran.length === 1);
    await waitFor('the slot given back', async () => (await owners(redis, running)).length === 0);
    await expect(app.finished(step)).resolves.toBe('done');
    expect(ran).toEqual([`${step.id}:1`, `${step.id}:2`]);
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);
});
