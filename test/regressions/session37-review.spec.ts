// Session 37: what CI of session 36's stop found (test/model, seed -50104961: a step job's parked run-time lock stayed
// after `obliterate({ force: true })` while another test file's queue held a live job numbered like it). Each case here
// failed before its fix.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { UniqueJobsReaper } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { workerOf } from '../conflicts/helpers.js';
import {
  asEarlierBuild,
  byId,
  digestOf,
  members,
  owners,
  removeUnguarded,
  runningKey,
  runtimeOwner,
  waitForParked,
} from '../support/locks.js';
import { Outcomes } from '../support/outcomes.js';
import { stepHandler } from '../support/step-handler.js';
import { bullOptions, uniqueName } from '../support/redis.js';

// A run-time lock's owner named only its job id (its queue only for a lock unique across queues), and a job id names a
// job only within its queue: BullMQ numbers every queue's jobs from 1. The reaper looked the owner of a parked slot up
// in every queue on the server and kept the slot while any of them held a live job of that id, so a step job removed
// behind the library's back (obliterate, a plain Queue, `clean`) kept its parked slot for its whole delay plus a lease,
// refusing new jobs of its digest, in any application with a second queue. The owner now names its queue.
describe('session 37: a parked run-time lock whose job was removed, another queue holding a live job of its id', () => {
  const { redis, start, onCleanup } = useApps('s37-parked');

  it('the reaper releases it', async () => {
    const app = await start({
      module: { reaper: { interval: false, grace: 0 } },
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: stepHandler([], { delayMs: 60_000 }),
    });
    const jobId = uniqueName('same-id');
    const other = new Queue(uniqueName('s37-other'), bullOptions());
    onCleanup(async () => {
      await other.obliterate({ force: true });
      await other.close();
    });
    await other.add('plain', {}, { jobId, delay: 60_000 }); // live, in a queue the application does not know

    await app.queue.add('sync', { id: 'a' }, { jobId });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    await waitForParked(redis, running, runtimeOwner(app, jobId));
    expect(await owners(redis, running)).toEqual([jobId]);
    const reaper = app.moduleRef.get(UniqueJobsReaper);
    expect((await reaper.run()).reaped.runtimeLeases).toBe(0); // its job is live: kept

    await removeUnguarded(app.queue.name, jobId);
    expect((await reaper.run()).reaped.runtimeLeases).toBe(1);
    expect(await owners(redis, running)).toEqual([]);
    expect(await other.getJobState(jobId)).toBe('delayed'); // the other queue's job is untouched
  }, 30_000);
});

// The reaper of an application that does not know the step job's queue (another service on the same library prefix):
// the owner's tag names a queue it finds in the library's queue registry or on the server, never one it takes for
// gone while its job lives (that would free a live step job's slot between its steps).
describe("session 37: a parked run-time lock reaped by an application that does not know the job's queue", () => {
  const { redis, start } = useApps('s37-elsewhere');

  it('is kept while its job lives, released once the job is removed', async () => {
    const worker = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: stepHandler([], { delayMs: 60_000 }),
    });
    const reaping = await start({
      queue: uniqueName('s37-elsewhere-reaper'),
      module: { prefix: worker.prefix, reaper: { interval: false, grace: 0 } },
    });
    const job = await worker.queue.add('sync', { id: 'a' });
    const running = runningKey(worker.prefix, digestOf(worker, 'sync', { id: 'a' }));
    await waitForParked(redis, running, runtimeOwner(worker, job.id!));
    const reaper = reaping.moduleRef.get(UniqueJobsReaper);
    expect((await reaper.run()).reaped.runtimeLeases).toBe(0);
    expect(await owners(redis, running)).toEqual([job.id]);

    await removeUnguarded(worker.queue.name, job.id!);
    expect((await reaper.run()).reaped.runtimeLeases).toBe(1);
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);
});

// Earlier development builds wrote a run-time lock's owner as the bare job id, or, for a lock unique across queues, as
// the pair of its queue's qualified name and id (see legacyRuntimeLockOwner). A job an older worker parked between two
// steps, resumed by an upgraded worker, must re-enter its own slot, not meet it as a duplicate's holder (its step 2
// would be dropped under `log`).
describe.each([
  ['the bare job id', false],
  ['its queue and id (a lock unique across queues)', true],
] as const)('session 37: a slot an earlier build parked under %s', (_label, acrossQueues) => {
  const { redis, start } = useApps('s37-legacy');

  it('is re-entered by the job it names; a duplicate still meets it; nothing stays', async () => {
    const ran: string[] = [];
    const app = await start({
      unique: {
        lock: 'while_executing',
        lockArgs: byId,
        jobName: 'sync',
        onConflict: 'log',
        ...(acrossQueues ? { uniqueAcross: 'queues' as const } : {}),
      },
      handler: stepHandler(ran, { delayMs: 60_000 }),
    });
    const outcomes = new Outcomes(workerOf(app));
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('old') });
    await waitForParked(redis, running, runtimeOwner(app, first.id!));
    // As an earlier build parked it: the same score (lease and parked mark), the member it wrote.
    const former = acrossQueues ? JSON.stringify([app.queue.qualifiedName, first.id]) : first.id!;
    await asEarlierBuild(redis, running, app, first.id!, former);
    expect(await members(redis, running)).toEqual([former]);

    const duplicate = await app.queue.add('sync', { id: 'a' }, { jobId: uniqueName('dup') });
    await expect(outcomes.completed(duplicate.id!)).resolves.toBeUndefined(); // met the parked slot: `log`
    await (await app.queue.getJob(first.id!))!.promote();
    await expect(outcomes.completed(first.id!)).resolves.toBe('done');
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    expect(await redis.exists(running)).toBe(0);
  }, 30_000);
});

// The owner names its queue by a 13-character tag, not its name: a member of a UUID job id on a queue of a long name
// stays within Redis' compact sorted-set encoding (members up to 64 bytes by default). With the queue's name (`["bull:
// <queue>","<id>"]`) such a member was past it, and the lock key took the skiplist encoding (about 1,100 bytes against
// 232 for one held lock, `MEMORY USAGE` on Redis 7 of the key `npm run bench:memory` measures).
describe('session 37: a run-time lock of a UUID job on a queue with a long name', () => {
  const { redis, start } = useApps('s37-compact-owner-with-a-long-queue-name');

  it('keeps the compact encoding', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
      handler: async () => {
        started();
        await held;
        return 'done';
      },
    });
    expect(app.queue.qualifiedName.length).toBeGreaterThan(40);
    const job = await app.queue.add('sync', { id: 'a' }, { jobId: randomUUID() });
    await running;
    const key = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    expect(await owners(redis, key)).toEqual([job.id]);
    expect(['listpack', 'ziplist']).toContain(await redis.object('ENCODING', key));
    release();
    await expect(app.finished(job)).resolves.toBe('done');
  });
});
