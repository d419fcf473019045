// Session 37, the run-time lock owner naming its queue (`runtimeLockOwner`): the paths that read, renew, release or
// report a lock owner, looked at once more. Each case failed before its fix (but the `this build` variant, the reference
// its `earlier build` twin is held to).
import { describe, expect, it } from '@jest/globals';
import { LockInspector } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import {
  asEarlierBuild,
  byId,
  digestOf,
  members,
  queuedKey,
  runningKey,
  runtimeOwner,
  waitForParked,
} from '../support/locks.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { stepHandler } from '../support/step-handler.js';
import { EventLog } from '../support/events.js';
import { Outcomes } from '../support/outcomes.js';
import { workerOf } from '../conflicts/helpers.js';
import { eventWithin } from './lifecycle-helpers.js';

// A step job parked by an earlier build holds its slot under its bare id (legacyRuntimeLockOwner), which an upgraded
// worker's take accepts as the job's own. A guarded `job.changeDelay` renewed only the member the new build writes:
// the slot an earlier build parked kept its old end, so once the job's old run time plus a lease had passed a duplicate
// took the digest while the job waited between its steps (and the job, due later, met it as a duplicate's holder).
describe('session 37: job.changeDelay of a step job an earlier build parked under its bare id', () => {
  const { redis, start } = useApps('s37-legacy-delay');

  it('moves that slot to the new run time, and the job re-enters it for its step 2', async () => {
    const ran: string[] = [];
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      handler: stepHandler(ran, { delayMs: 60_000 }),
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('old') });
    await waitForParked(redis, running, runtimeOwner(app, first.id!));
    // As an earlier build parked it: the same score (lease and parked mark), the bare id.
    await asEarlierBuild(redis, running, app, first.id!, first.id!);

    await (await app.queue.getJob(first.id!))!.changeDelay(600_000);
    const movedAt = Date.now();
    expect(await members(redis, running)).toEqual([first.id]);
    expect(Number(await redis.zscore(running, first.id!))).toBeGreaterThanOrEqual(movedAt + 600_000);

    await (await app.queue.getJob(first.id!))!.promote();
    await expect(app.finished(first.id!)).resolves.toBe('done');
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    expect(await redis.exists(running)).toBe(0);
  }, 30_000);
});

// The same slot, when BullMQ fails the job for good without running it (here: started more often than the worker's
// `maxStartedAttempts`): the run-time lock slot parked for its next delivery is given back (giveBackParked), but only
// under the member the new build writes, so the slot an earlier build parked stayed until its lease ended (a day for a
// job waiting for its children) or the orphan reaper's pass, refusing every new job of the digest.
describe.each([
  ['this build', false],
  ['an earlier build, under the bare id', true],
] as const)('session 37: a step job parked by %s, failed for good without running again', (_label, legacy) => {
  const { redis, start } = useApps('s37-legacy-fail');

  it('gives its parked slot back', async () => {
    const ran: string[] = [];
    const app = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId, jobName: 'sync' },
      handler: stepHandler(ran, { delayMs: 60_000 }),
      worker: { maxStartedAttempts: 1 },
    });
    const events = new EventLog(app);
    const outcomes = new Outcomes(workerOf(app));
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('old') });
    await waitForParked(redis, running, runtimeOwner(app, first.id!));
    const member = legacy ? first.id! : runtimeOwner(app, first.id!);
    if (legacy) await asEarlierBuild(redis, running, app, first.id!, member);
    expect(await members(redis, running)).toEqual([member]);

    await (await app.queue.getJob(first.id!))!.promote();
    await outcomes.failures(first.id!); // started a second time: failed by BullMQ, the handler not called
    const released = (event: { type: string; lock?: string; jobId?: string }) =>
      event.type === 'unlocked' && event.lock === 'runtime' && event.jobId === first.id;
    expect(await eventWithin(events, released, 5_000)).toBeDefined();
    expect(ran).toEqual([`${first.id}:1`]);
    expect(await redis.exists(running)).toBe(0);
  }, 30_000);
});

// A custom job id may look like a run-time lock owner (a JSON pair: BullMQ allows `["x","y"]`). The inspector read
// every sorted-set lock's members as run-time lock owners, so a general-path enqueue lock held by such a job showed
// job "y" of a queue "x" (missing), and a `--job` filter of the real id did not find it.
describe('session 37: an enqueue lock held by a job whose id looks like a JSON pair', () => {
  const { redis, start } = useApps('s37-pair-id');

  it('is shown held by that id, in its queue, and found by it', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, jobName: 'sync', lockLimit: 2 },
      paused: true, // the job stays waiting, holding its slot
    });
    const jobId = JSON.stringify([uniqueName('x'), '7']);
    const job = await app.queue.add('sync', { id: 'a' }, { jobId });
    const digest = digestOf(app, 'sync', { id: 'a' });
    const inspector = new LockInspector({
      client: redis,
      prefix: app.prefix,
      queues: [{ name: app.queue.name, prefix: bullPrefix() }],
    });
    const [lock] = await inspector.showLock(digest);
    expect(lock).toMatchObject({ storage: 'queued', key: queuedKey(app.prefix, digest), queue: app.queue.name });
    expect(lock.owners).toEqual([expect.objectContaining({ jobId: job.id, jobState: 'waiting', jobName: 'sync' })]);
    const listed = await inspector.listLocks({ jobId });
    expect(listed.locks.map((held) => held.key)).toEqual([queuedKey(app.prefix, digest)]);
  }, 30_000);
});
