// Session 41, hostile review of stale parked slots read together: mixed holders, re-entry between the reads and the
// give-backs, and a read or give-back of one holder that fails, which leaves the others going (a slot freed lets the
// take through). (Its review of RedisUnavailableError.reachableElsewhere is in test/redis-down.spec.ts.)
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { PARKED_MARK } from '../../lib/locks/lock-store.js';
import { UNIQUE_JOBS_REDIS } from '../../lib/nest/unique-jobs.constants.js';
import { legacyRuntimeLockOwner, queueTag } from '../../lib/redis/runtime-lock-owner.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { byId, digestOf, owners, runningKey, runtimeOwner } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

function libraryClient(app: TestApp): Redis {
  return app.moduleRef.get<{ client: Redis }>(UNIQUE_JOBS_REDIS).client;
}

/** Hooks every command `client` sends (name and all args); a hook may delay or reject it. */
function hookCommands(
  client: Redis,
  before: (name: string, args: string[]) => Promise<void> | void,
): { sent: [string, string[]][]; stop(): void } {
  const sent: [string, string[]][] = [];
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command: Parameters<typeof send>[0]) => {
    const name = command.name.toLowerCase();
    const args = command.args.map(String);
    sent.push([name, args]);
    const hook = before(name, args);
    if (!hook) return send(command);
    return hook.then(() => send(command));
  };
  return { sent, stop: () => void (client.sendCommand = send) };
}

async function parkMember(redis: Redis, key: string, member: string): Promise<string> {
  await redis.zadd(key, String(Date.now() + 60_000 + Number(PARKED_MARK)), member);
  await redis.pexpire(key, 120_000);
  return member;
}

const unique = { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' } as const;

describe('session 41 hostile: stale parked slots read together', () => {
  const { redis, start } = useApps('s41-hostile');

  it("lockLimit 4: gone, finished, live and another queue's holders: only the two stale own-queue ones are given back", async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit: 4 },
      handler: async (job: Job) => void ran.push(job.id!),
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const finished = await app.queue.add('other', {}, { jobId: uniqueName('done') });
    await app.finished(finished);
    const live = await app.queue.add('other', {}, { delay: 60_000, jobId: uniqueName('live') });
    const gone = uniqueName('ghost');
    await parkMember(redis, running, runtimeOwner(app, gone));
    await parkMember(redis, running, runtimeOwner(app, finished.id!));
    const liveMember = await parkMember(redis, running, runtimeOwner(app, live.id!));
    // Another queue's holder, whose id is not a job of this queue either: the reaper's, not this take's.
    const foreign = await parkMember(redis, running, JSON.stringify([queueTag('bull:elsewhere'), uniqueName('x')]));
    const next = await app.queue.add('sync', { id: 'a' });
    await waitFor('the next job to run', () => ran.includes(next.id!));
    expect(
      events
        .of('reaped')
        .map((e) => [e.jobId, e.reason])
        .sort(),
    ).toEqual(
      [
        [gone, 'job gone'],
        [finished.id, 'job finished'],
      ].sort(),
    );
    await app.finished(next);
    expect(await redis.zscore(running, liveMember)).not.toBeNull();
    expect(await redis.zscore(running, foreign)).not.toBeNull();
    await redis.del(running);
    await live.remove();
  }, 30_000);

  it('the same job parked under two members (current and earlier-build form): both given back, an event each', async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit: 2 },
      handler: async (job: Job) => void ran.push(job.id!),
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const ghost = uniqueName('ghost');
    await parkMember(redis, running, runtimeOwner(app, ghost));
    await parkMember(redis, running, legacyRuntimeLockOwner(ghost, app.queue.qualifiedName));
    const next = await app.queue.add('sync', { id: 'a' });
    await app.finished(next);
    expect(ran).toEqual([next.id]);
    expect(events.of('reaped').map((e) => e.jobId)).toEqual([ghost, ghost]);
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);

  it('two stale holders, one re-enters between the reads and the give-backs: the other alone is given back, the new job runs', async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit: 2 },
      handler: async (job: Job) => void ran.push(job.id!),
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const [back, stale] = [uniqueName('back'), uniqueName('stale')];
    const backMember = await parkMember(redis, running, runtimeOwner(app, back));
    await parkMember(redis, running, runtimeOwner(app, stale));
    const reentered = String(Date.now() + 60_000 + 5 / 1024);
    let reads = 0;
    const hook = hookCommands(libraryClient(app), async (name) => {
      // Both reads answered, before either give-back is sent: `back` re-enters its slot.
      if (name === 'hmget' && ++reads === 2) await redis.zadd(running, reentered, backMember);
    });
    let next: Job;
    try {
      next = await app.queue.add('sync', { id: 'a' });
      await app.finished(next);
    } finally {
      hook.stop();
    }
    expect(ran).toEqual([next.id]);
    expect(events.of('reaped').map((e) => e.jobId)).toEqual([stale]);
    expect(Number(await redis.zscore(running, backMember))).toBe(Number(reentered));
    await redis.del(running);
  }, 30_000);

  it('the look-up of one of two stale holders fails: no unhandled rejection, the other is given back and the job runs', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit: 2 },
      handler: async (job: Job) => void ran.push(job.id!),
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const [ok, bad] = [uniqueName('ok'), uniqueName('bad')];
    await parkMember(redis, running, runtimeOwner(app, ok));
    const badMember = await parkMember(redis, running, runtimeOwner(app, bad));
    const hook = hookCommands(libraryClient(app), (name, args) => {
      if (name === 'hmget' && args[0].endsWith(`:${bad}`)) return Promise.reject(new Error('NOPERM simulated'));
    });
    let next: Job;
    try {
      next = await app.queue.add('sync', { id: 'a' });
      await app.finished(next);
    } finally {
      hook.stop();
      process.off('unhandledRejection', onRejection);
    }
    expect(ran).toEqual([next.id]);
    expect(rejections).toEqual([]);
    expect(events.of('reaped').map((e) => e.jobId)).toEqual([ok]);
    expect(await redis.zscore(running, badMember)).not.toBeNull(); // not read: kept for the reaper
    await redis.del(running);
  }, 30_000);

  it('the give-back of one of two stale holders fails: the other is given back, so the new job takes that slot and runs', async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit: 2 },
      handler: async (job: Job) => void ran.push(job.id!),
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const [ok, bad] = [uniqueName('ok'), uniqueName('bad')];
    await parkMember(redis, running, runtimeOwner(app, ok));
    const badMember = await parkMember(redis, running, runtimeOwner(app, bad));
    const hook = hookCommands(libraryClient(app), (name, args) => {
      if (name === 'evalsha' && args.includes(badMember))
        return Promise.reject(new Error('simulated give-back failure'));
    });
    let next: Job;
    try {
      next = await app.queue.add('sync', { id: 'a' });
      await app.finished(next);
    } finally {
      hook.stop();
    }
    expect(events.of('reaped').map((e) => e.jobId)).toEqual([ok]);
    expect(ran).toEqual([next.id]); // the slot freed lets the take through
    expect(await redis.zscore(running, badMember)).not.toBeNull();
    await redis.del(running);
  }, 30_000);
});
