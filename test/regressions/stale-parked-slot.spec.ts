// A run-time lock slot parked for a job's next delivery whose job will not come back for it: a parent failed by its
// child while it waited for its children (`failParentOnFailure`), or a parked job removed without the library. A new
// job of the digest met it and ended through its strategy (`log`: its handler never ran) until the orphan reaper's next
// pass (found by a review, session 39). Its take now gives back such a slot of its own queue and runs.
import { describe, expect, it } from '@jest/globals';
import { DelayedError, Queue, UnrecoverableError, WaitingChildrenError, type Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { byId, digestOf, owners, runningKey, runtimeOwner, waitForParked } from '../support/locks.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { stepHandler } from '../support/step-handler.js';
import { waitFor } from '../support/wait.js';

describe('a new job meeting a parked run-time slot whose job will not come back', () => {
  const { redis, start, keysOf, onCleanup } = useApps('stale-park');

  it('a parent failed by its child: its parked slot is given back at its failure, the next parent of the digest runs', async () => {
    const ref: { app?: TestApp } = {};
    const ran: string[] = [];
    const app = (ref.app = await start({
      module: { reaper: { interval: false } },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      worker: { concurrency: 2 },
      handler: async (job: Job<{ id: string; fails?: boolean }>) => {
        if (job.name === 'child') {
          // Fails once its parent waits for it (the case this covers): a child failed sooner, under load, fails the
          // parent in moveToWaitingChildren, in its own attempt, which gives its slot back at once (nothing parked).
          const parent = String(job.parent?.id);
          await waitFor(
            'the parent waiting',
            async () => (await ref.app!.queue.getJobState(parent)) === 'waiting-children',
          );
          throw new UnrecoverableError('child fails');
        }
        ran.push(job.id!);
        if (!job.data.fails) return 'parent done';
        const parent = { id: job.id!, queue: job.queueQualifiedName };
        await ref.app!.queue.add('child', { id: 'c' }, { parent, failParentOnFailure: true });
        if (await job.moveToWaitingChildren(job.token!)) throw new WaitingChildrenError();
        return 'parent done';
      },
    }));
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a', fails: true }, { jobId: uniqueName('parent') });
    await expect(app.finished(first)).rejects.toThrow();
    // Its worker's `failed` event (BullMQ failed it for good, without calling the processor): the slot parked for a
    // day is given back then (session 51; before, the next take met it and gave it back, as for a parked job removed
    // without the library, below).
    await waitFor('the parked slot given back', async () => (await owners(redis, running)).length === 0);
    const next = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('next') });
    await expect(app.finished(next)).resolves.toBe('parent done');
    expect(ran).toEqual([first.id, next.id]);
    expect(events.of('reaped')).toEqual([]);
    expect(await owners(redis, running)).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
  }, 30_000);

  it('a live parked job keeps its slot: the new job meets it (log), as before', async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      handler: stepHandler(ran, { delayMs: 60_000 }),
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('step') });
    await waitForParked(redis, running, runtimeOwner(app, first.id!));
    const duplicate = await app.queue.add('sync', { id: 'a' });
    await expect(app.finished(duplicate)).resolves.toBeNull(); // met the lock: logged, not run
    expect(ran).toEqual([`${first.id}:1`]);
    expect(await owners(redis, running)).toEqual([first.id]);
    await (await app.queue.getJob(first.id!))!.remove();
  }, 30_000);

  it('a parked job removed without the library: the next job of the digest runs', async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      handler: async (job: Job<{ id: string; park?: boolean }>) => {
        ran.push(job.id!);
        if (!job.data.park) return 'done';
        await job.updateData({ ...job.data, park: false });
        await job.moveToDelayed(Date.now() + 60_000, job.token);
        throw new DelayedError();
      },
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a', park: true }, { jobId: uniqueName('step') });
    await waitForParked(redis, running, runtimeOwner(app, first.id!));
    const unguarded = new Queue(app.queue.name, bullOptions());
    onCleanup(() => unguarded.close());
    await (await unguarded.getJob(first.id!))!.remove();
    const next = await app.queue.add('sync', { id: 'a' });
    await expect(app.finished(next)).resolves.toBe('done');
    expect(ran).toEqual([first.id, next.id]);
    expect(await keysOf(app)).toEqual([]);
  }, 30_000);
});
