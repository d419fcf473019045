// L4: `replace` with several producers at once replaces in a chain (each new job takes the place of the holder it met),
// leaving one job and no dead-set entry naming a job that is gone. L5: a caller's `jobId` that already exists, reused
// with other data, takes no lock on the other data's digest.
import { describe, expect, it } from '@jest/globals';
import { UniqueJobsError, type EnqueueResult } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import {
  byId,
  dedupHolder,
  digestOf,
  enqueuedJob,
  expiringKey,
  owners,
  queuedKey,
  removeUnguarded,
} from '../support/locks.js';
import { failureOf, pendingJobs } from './lifecycle-helpers.js';

/** A result as a diff shows it well; a duplicate says whether the job it names exists. */
async function summary(app: TestApp, result: EnqueueResult): Promise<Record<string, unknown>> {
  if (result.status === 'enqueued') return { status: 'enqueued', replacedJobId: result.replacedJobId };
  const holder = result.existingJobId === undefined ? undefined : await app.queue.getJob(result.existingJobId);
  return {
    status: 'duplicate',
    strategy: result.strategy,
    existingJobId: result.existingJobId,
    existingJobExists: holder !== undefined,
  };
}

describe('L4 replace with concurrent producers, L5 a reused caller jobId', () => {
  const { redis, start } = useApps('lcenq');

  it('L4 until_executed replace: 5 concurrent enqueues of one digest each replace the holder they met; one job remains and the dead set is empty', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'replace' },
      paused: true,
    });
    const holder = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 0 }));
    const events = new EventLog(app);
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map((n) => app.service.enqueue(app.queue, 'sync', { id: 'u1', n })),
    );
    const summaries = await Promise.all(results.map((result) => summary(app, result)));
    // Today one replaces the holder and the others fall back to reject, naming the holder that was just removed.
    for (const entry of summaries) {
      if (entry.status === 'duplicate') expect(entry).toMatchObject({ existingJobExists: true });
    }
    // Each is enqueued; one whose add landed after another producer removed the holder it met, before that producer's
    // own add, met no holder and replaced none (the other producer then replaces it in turn).
    expect(summaries.map((entry) => entry.status)).toEqual(Array(5).fill('enqueued'));
    expect(summaries.filter((entry) => entry.replacedJobId !== undefined).length).toBeGreaterThanOrEqual(1);

    const pending = (await pendingJobs(app)).filter((job) => (job.data as { id: string }).id === 'u1');
    expect(pending).toHaveLength(1);
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'sync', { id: 'u1' }))).toBe(pending[0].id);
    const replaced = results.flatMap((result) => (result.status === 'enqueued' ? [result.replacedJobId!] : []));
    // A result names the last holder its call removed: the call that removed the holder names a later producer's job
    // when its add met that job and it replaced it too. The `replaced` events name each removed holder, once.
    const removed = events.of('replaced').map((event) => event.replacedJobId);
    expect(removed.filter((id) => id === holder.id)).toHaveLength(1);
    expect(new Set(removed).size).toBe(removed.length);
    expect(removed).toEqual(expect.arrayContaining(replaced.filter((id) => id !== undefined)));
    for (const id of removed) expect(await app.queue.getJob(id)).toBeUndefined();
    expect(await app.service.deadSet.size()).toBe(0);
  });

  it('L5 general path (lockLimit 2): a caller jobId reused with other data returns the existing job and holds no lock for the other digest', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, paused: true });
    const first = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'a' }, { jobId: 'job-1' }));
    expect(first.id).toBe('job-1');
    const second = await app.service.enqueue(app.queue, 'sync', { id: 'b' }, { jobId: 'job-1' });
    expect(second.status === 'enqueued' ? second.job.id : second.existingJobId).toBe('job-1');
    // Today job-1 (whose data is { id: 'a' }) also holds a slot of digest "b" for 24 hours.
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'b' })))).toEqual([]);
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'a' })))).toEqual(['job-1']);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('(hostile review) addBulk is all or nothing: a bad entry among slot-set entries enqueues none and keeps no slot', async () => {
    const app = await start({
      unique: [{ jobName: 'u', lock: 'until_executed', lockArgs: byId, lockLimit: 2 }],
      paused: true,
    });
    const error = await failureOf(
      app.queue.addBulk([
        { name: 'plain', data: { id: 'p' } },
        { name: 'u', data: { id: 'a' } },
        { name: 'u', data: { id: 'b' }, opts: { jobId: '123' } }, // BullMQ: a custom id cannot be an integer
      ]),
    );
    expect(error).toBeDefined();
    // Before: the plain job and the fast-path jobs were added by the one addBulk, the slot-set entries one by one after.
    expect(await app.queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 0 });
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'u', { id: 'a' })))).toEqual([]);
  });

  it('(hostile review) a unique child on the fast path fails with a typed error naming "parent"; a bulk it is in keeps no slot of the others', async () => {
    const app = await start({
      unique: [
        { jobName: 'fast', lock: 'until_executed', lockArgs: byId },
        { jobName: 'slots', lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      ],
      paused: true,
    });
    const parent = { id: 'p1', queue: `bull:${app.queue.name}` };
    const alone = await failureOf(app.queue.add('fast', { id: 'c' }, { parent }));
    expect(alone).toBeInstanceOf(UniqueJobsError);
    expect(String(alone)).toMatch(/"parent".*deduplication key/);
    const bulk = await failureOf(
      app.queue.addBulk([
        { name: 'slots', data: { id: 'a' } },
        { name: 'fast', data: { id: 'c' }, opts: { parent } },
      ]),
    );
    expect(bulk).toBeInstanceOf(UniqueJobsError);
    expect(await app.queue.getJobCounts('waiting', 'delayed', 'waiting-children')).toEqual({
      waiting: 0,
      delayed: 0,
      'waiting-children': 0,
    });
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'slots', { id: 'a' })))).toEqual([]);
    expect(await dedupHolder(redis, app.queue.name, digestOf(app, 'fast', { id: 'c' }))).toBeNull();
  });
  it('(model, seed 32666532) lockLimit 2: a caller jobId whose delayed job was drained behind the library is enqueued again, not answered as a duplicate of a job that is gone', async () => {
    const app = await start({ unique: { lock: 'until_executing', lockArgs: byId, lockLimit: 2 }, paused: true });
    const first = await app.queue.add('sync', { id: 'd0' }, { delay: 3_600_000 });
    await app.queue.drain(true); // BullMQ removes the delayed job; the library's slot names it until it is met
    const again = await app.service.enqueue(app.queue, 'sync', { id: 'd0' }, { delay: 3_600_000, jobId: first.id });
    expect(await summary(app, again)).toEqual({ status: 'enqueued', replacedJobId: undefined });
    expect(await app.queue.getJobState(first.id!)).toBe('delayed');
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'd0' })))).toEqual([first.id]);
  });
  it('(model, seed -731653428) until_expired: the jobId of a finished and removed job stays refused for its period', async () => {
    const app = await start({ unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 3_600_000 } });
    const first = await app.queue.add('sync', { id: 'd2' });
    await app.finished(first);
    await app.queue.remove(first.id!);
    const again = await app.service.enqueue(app.queue, 'sync', { id: 'd2' }, { delay: 3_600_000, jobId: first.id });
    expect(again).toMatchObject({ status: 'duplicate', existingJobId: first.id });
    expect(await app.queue.getJob(first.id!)).toBeUndefined();
  });
  it('(model, seed 837428354) until_expired: an add answered by an existing job of another digest keeps the period hold of that id', async () => {
    const app = await start({ unique: { lock: 'until_expired', lockArgs: byId, lockTtl: 3_600_000 }, paused: true });
    const first = await app.queue.add('sync', { id: 'd0' }, { delay: 3_600_000 });
    await app.queue.drain(true); // the job goes; its until_expired period stays
    const period = expiringKey(app.prefix, digestOf(app, 'sync', { id: 'd0' }));
    expect(await owners(redis, period)).toEqual([first.id]);
    await app.queue.add('sync', { id: 'd1' }, { jobId: first.id }); // the id now names a d1 job
    await app.service.enqueue(app.queue, 'sync', { id: 'd0' }, { jobId: first.id }); // BullMQ answers with the d1 job
    expect(await owners(redis, period)).toEqual([first.id]);
  });

  it('(model, seed 1052502980) replace, lockLimit 2: a stale hold whose id now names a job of another digest never gets that job removed', async () => {
    const app = await start({
      unique: { lock: 'until_executing', lockArgs: byId, lockLimit: 2, onConflict: 'replace' },
      paused: true,
    });
    const first = await app.queue.add('sync', { id: 'd0' }, { delay: 3_600_000 });
    await removeUnguarded(app.queue.name, first.id!); // behind the library's back: d0's slot still names the id until it is met
    const other = await app.queue.add('sync', { id: 'd1' }, { delay: 3_600_000, jobId: first.id }); // the id, for d1
    await app.queue.addBulk([
      { name: 'sync', data: { id: 'd0' } },
      { name: 'sync', data: { id: 'd0' } },
    ]);
    // d1's job stays, and holds d1's lock. d0's second job replaced its first (the stale hold, until the reaper frees
    // it, fills d0's other slot): one d0 job, holding d0's lock.
    expect(await app.queue.getJobState(other.id!)).toBe('delayed');
    expect((await app.queue.getJob(other.id!))?.data).toEqual({ id: 'd1' });
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'd1' })))).toEqual([other.id]);
    const d0 = (await pendingJobs(app)).filter((job) => (job.data as { id: string }).id === 'd0');
    expect(d0).toHaveLength(1);
    const d0Holders = await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'd0' })));
    expect(d0Holders.sort()).toEqual([first.id, d0[0].id].sort());
  });

  it('(model, seed 331917325) until_expired replace, lockLimit 2: a caller jobId holding its own period replaces nothing and is answered as a duplicate of that period', async () => {
    const app = await start({
      unique: { lock: 'until_expired', lockArgs: byId, lockLimit: 2, lockTtl: 3_600_000, onConflict: 'replace' },
      paused: true,
    });
    const first = await app.queue.add('sync', { id: 'd1' }, { delay: 3_600_000, jobId: 'own-x' });
    await first.remove(); // the job goes; its until_expired period stays
    const second = await app.queue.add('sync', { id: 'd1' }, { delay: 3_600_000 }); // fills the other slot
    const period = expiringKey(app.prefix, digestOf(app, 'sync', { id: 'd1' }));
    expect((await owners(redis, period)).sort()).toEqual(['own-x', second.id].sort());

    const result = await app.service.enqueue(app.queue, 'sync', { id: 'd1' }, { jobId: 'own-x' });
    // Refused by its own id's period whatever is replaced: the second job and its period stay.
    expect(await summary(app, result)).toMatchObject({ status: 'duplicate', existingJobId: 'own-x' });
    expect(await app.queue.getJobState(second.id!)).toBe('delayed');
    expect((await owners(redis, period)).sort()).toEqual(['own-x', second.id].sort());
  });
});
