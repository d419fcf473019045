// Review of the stale-parked-slot change (session 39): a refused run-time take gives back a slot parked for a job that
// will not come back for it (finished or gone). Attacked as a hostile user would: races on one stale slot, the parked
// job re-entering between the read of its hash and the release, several slots, the cost of a refusal, and an error of
// the look-up itself.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { PARKED_MARK } from '../../lib/locks/lock-marks.js';
import { UNIQUE_JOBS_REDIS } from '../../lib/nest/unique-jobs.constants.js';
import { STEPS_FIELD } from '../../lib/redis/keys.js';
import { legacyRuntimeLockOwner, queueTag } from '../../lib/redis/runtime-lock-owner.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, owners, runningKey, runtimeOwner } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/** The library's own client (its lock store's). */
function libraryClient(app: TestApp): Redis {
  return app.moduleRef.get<{ client: Redis }>(UNIQUE_JOBS_REDIS).client;
}

/** Watches the commands `client` sends (name and first argument) until the returned function is called. */
function watchCommands(
  client: Redis,
  before?: (name: string, key: string, args: string[]) => Promise<void> | void,
): { sent: [string, string][]; stop(): void } {
  const sent: [string, string][] = [];
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command: Parameters<typeof send>[0]) => {
    const name = command.name.toLowerCase();
    const key = String(command.args[0] ?? '');
    sent.push([name, key]);
    const hook = before?.(name, key, command.args.map(String));
    if (!hook) return send(command);
    return hook.then(() => send(command));
  };
  return { sent, stop: () => void (client.sendCommand = send) };
}

/** A slot parked (its score carries the parked mark) for `member`, a minute from now. */
async function parkMember(redis: Redis, key: string, member: string): Promise<string> {
  await redis.zadd(key, String(Date.now() + 60_000 + Number(PARKED_MARK)), member);
  await redis.pexpire(key, 120_000);
  return member;
}

/** A slot parked for a job id of the app's queue; its job, when there, counts a step (as the library's park writes). */
async function parkFor(redis: Redis, key: string, app: TestApp, jobId: string): Promise<string> {
  const jobKey = `${app.queue.qualifiedName}:${jobId}`;
  if ((await redis.exists(jobKey)) === 1) await redis.hincrby(jobKey, STEPS_FIELD, 1);
  return parkMember(redis, key, runtimeOwner(app, jobId));
}

const unique = { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' } as const;

describe('stale parked slot: review', () => {
  const { redis, start, keysOf } = useApps('stale-review');

  it('two new jobs meeting one stale slot at once: it is given back once, and one of them runs (lockLimit 1)', async () => {
    const ran: string[] = [];
    const gate = hold();
    const app = await start({
      module: { reaper: { interval: false } },
      unique,
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        ran.push(job.id!);
        await gate.promise;
        return 'done';
      },
      paused: true,
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    await parkFor(redis, running, app, uniqueName('ghost'));
    const [b, c] = await app.queue.addBulk([
      { name: 'sync', data: { id: 'a' } },
      { name: 'sync', data: { id: 'a' } },
    ]);
    app.start();
    const loser = await Promise.race([app.finished(b).then(() => b), app.finished(c).then(() => c)]);
    expect(await app.finished(loser)).toBeNull(); // met the winner: logged, not run
    expect(ran).toHaveLength(1);
    expect(ran[0]).not.toBe(loser.id);
    expect(events.of('reaped')).toHaveLength(1);
    gate.resolve();
    await app.finished(loser.id === b.id ? c : b);
    expect(await keysOf(app)).toEqual([]);
  }, 30_000);

  it('the parked job re-enters between the read of its hash and the release: its slot is kept', async () => {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique,
      handler: async (job: Job) => void ran.push(job.id!),
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const ghost = uniqueName('ghost');
    const member = await parkFor(redis, running, app, ghost);
    const reentered = String(Date.now() + 60_000 + 5 / 1024); // a take's mark, not the parked one
    const watch = watchCommands(libraryClient(app), async (name, key) => {
      if (name === 'hmget' && key.endsWith(`:${ghost}`)) await redis.zadd(running, reentered, member);
    });
    try {
      const next = await app.queue.add('sync', { id: 'a' });
      expect(await app.finished(next)).toBeNull(); // met the re-entered job
    } finally {
      watch.stop();
    }
    expect(ran).toEqual([]);
    expect(events.of('reaped')).toEqual([]);
    expect(Number(await redis.zscore(running, member))).toBe(Number(reentered));
    await redis.del(running);
  }, 30_000);

  it('lockLimit 2, a live parked holder and a stale one: only the stale one is given back', async () => {
    const ran: string[] = [];
    const gate = hold();
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit: 2 },
      handler: async (job: Job) => {
        ran.push(job.id!);
        await gate.promise;
        return 'done';
      },
    });
    const events = new EventLog(app);
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const live = await app.queue.add('other', {}, { delay: 60_000, jobId: uniqueName('live') });
    const liveMember = await parkFor(redis, running, app, live.id!);
    const ghost = uniqueName('ghost');
    await parkFor(redis, running, app, ghost);
    const next = await app.queue.add('sync', { id: 'a' });
    await waitFor('the next job to run', () => ran.includes(next.id!));
    expect(events.of('reaped')).toEqual([expect.objectContaining({ jobId: ghost, reason: 'job gone' })]);
    expect((await owners(redis, running)).sort()).toEqual([live.id!, next.id!].sort());
    gate.resolve();
    await app.finished(next);
    expect(await redis.zscore(running, liveMember)).not.toBeNull();
    await redis.del(running);
    await live.remove();
  }, 30_000);

  /** An app at `lockLimit` whose handler records the jobs it ran; its events and its digest's run-time lock key. */
  async function startCounting(lockLimit: number) {
    const ran: string[] = [];
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockLimit },
      handler: async (job: Job) => void ran.push(job.id!),
    });
    return { app, ran, events: new EventLog(app), running: runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' })) };
  }

  /** Adds the next job of the digest and waits for its end, the library's commands watched meanwhile. */
  async function nextJob(app: TestApp, before?: Parameters<typeof watchCommands>[1]) {
    const watch = watchCommands(libraryClient(app), before);
    try {
      const next = await app.queue.add('sync', { id: 'a' });
      await app.finished(next);
      return { next, sent: watch.sent };
    } finally {
      watch.stop();
    }
  }

  const reapedIds = (events: EventLog) =>
    events
      .of('reaped')
      .map((event) => event.jobId)
      .sort();

  it('lockLimit 2, two stale parked holders: their jobs are read together (one round trip), then both given back', async () => {
    const { app, ran, events, running } = await startCounting(2);
    const ghosts = [uniqueName('ghost'), uniqueName('ghost')];
    for (const ghost of ghosts) await parkFor(redis, running, app, ghost);
    const { next, sent } = await nextJob(app);
    expect(ran).toEqual([next.id]);
    expect(reapedIds(events)).toEqual([...ghosts].sort());
    // Both reads are sent before the first give-back (one after the other, the second waited for the first's answer).
    const names = sent.map(([name]) => name);
    const firstRead = names.indexOf('hmget');
    expect(names.slice(firstRead, firstRead + 2)).toEqual(['hmget', 'hmget']);
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);

  // Session 41's hostile review of the reads together (helper-131).
  it("lockLimit 4: gone, finished, live and another queue's holders: only the two stale own-queue ones are given back", async () => {
    const { app, ran, events, running } = await startCounting(4);
    const finished = await app.queue.add('other', {}, { jobId: uniqueName('done') });
    await app.finished(finished);
    const live = await app.queue.add('other', {}, { delay: 60_000, jobId: uniqueName('live') });
    const gone = uniqueName('ghost');
    await parkFor(redis, running, app, gone);
    await parkFor(redis, running, app, finished.id!);
    const liveMember = await parkFor(redis, running, app, live.id!);
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
    const { app, ran, events, running } = await startCounting(2);
    const ghost = uniqueName('ghost');
    await parkFor(redis, running, app, ghost);
    await parkMember(redis, running, legacyRuntimeLockOwner(ghost, app.queue.qualifiedName));
    const { next } = await nextJob(app);
    expect(ran).toEqual([next.id]);
    expect(reapedIds(events)).toEqual([ghost, ghost]);
    expect(await owners(redis, running)).toEqual([]);
  }, 30_000);

  it('two stale holders, one re-enters between the reads and the give-backs: the other alone is given back, the new job runs', async () => {
    const { app, ran, events, running } = await startCounting(2);
    const [back, stale] = [uniqueName('back'), uniqueName('stale')];
    const backMember = await parkFor(redis, running, app, back);
    await parkFor(redis, running, app, stale);
    const reentered = String(Date.now() + 60_000 + 5 / 1024);
    let reads = 0;
    const { next } = await nextJob(app, async (name) => {
      // Both reads answered, before either give-back is sent: `back` re-enters its slot.
      if (name === 'hmget' && ++reads === 2) await redis.zadd(running, reentered, backMember);
    });
    expect(ran).toEqual([next.id]);
    expect(reapedIds(events)).toEqual([stale]);
    expect(Number(await redis.zscore(running, backMember))).toBe(Number(reentered));
    await redis.del(running);
  }, 30_000);

  it('the look-up of one of two stale holders fails: no unhandled rejection, the other is given back and the job runs', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const { app, ran, events, running } = await startCounting(2);
    const [ok, bad] = [uniqueName('ok'), uniqueName('bad')];
    await parkFor(redis, running, app, ok);
    const badMember = await parkFor(redis, running, app, bad);
    let next: Job;
    try {
      ({ next } = await nextJob(app, (name, key) => {
        if (name === 'hmget' && key.endsWith(`:${bad}`)) return Promise.reject(new Error('NOPERM simulated'));
      }));
    } finally {
      process.off('unhandledRejection', onRejection);
    }
    expect(ran).toEqual([next.id]);
    expect(rejections).toEqual([]);
    expect(reapedIds(events)).toEqual([ok]);
    expect(await redis.zscore(running, badMember)).not.toBeNull(); // not read: kept for the reaper
    await redis.del(running);
  }, 30_000);

  it('the give-back of one of two stale holders fails: the other is given back, so the new job takes that slot and runs', async () => {
    const { app, ran, events, running } = await startCounting(2);
    const [ok, bad] = [uniqueName('ok'), uniqueName('bad')];
    await parkFor(redis, running, app, ok);
    const badMember = await parkFor(redis, running, app, bad);
    const { next } = await nextJob(app, (name, _key, args) => {
      if (name === 'evalsha' && args.includes(badMember))
        return Promise.reject(new Error('simulated give-back failure'));
    });
    expect(reapedIds(events)).toEqual([ok]);
    expect(ran).toEqual([next.id]); // the slot freed lets the take through
    expect(await redis.zscore(running, badMember)).not.toBeNull();
    await redis.del(running);
  }, 30_000);

  it('cost: a refusal by a running (not parked) holder sends no look-up; one by a parked one, one per take', async () => {
    const gate = hold();
    const app = await start({
      module: { reaper: { interval: false } },
      unique: { ...unique, lockTimeout: 300 },
      worker: { concurrency: 2 },
      handler: async (job: Job<{ hold?: boolean }>) => {
        if (job.data.hold) await gate.promise;
        return 'done';
      },
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const first = await app.queue.add('sync', { id: 'a', hold: true });
    await waitFor('the first job to hold the lock', async () => (await owners(redis, running)).includes(first.id!));
    const watch = watchCommands(libraryClient(app));
    try {
      expect(await app.finished(await app.queue.add('sync', { id: 'a' }))).toBeNull();
      expect(watch.sent.filter(([name]) => name === 'hmget')).toEqual([]);
      gate.resolve();
      await app.finished(first);
      const live = await app.queue.add('other', {}, { delay: 60_000, jobId: uniqueName('live') });
      await parkFor(redis, running, app, live.id!);
      watch.sent.length = 0;
      expect(await app.finished(await app.queue.add('sync', { id: 'a' }))).toBeNull(); // waited 300 ms, asked again
      expect(watch.sent.filter(([name]) => name === 'evalsha').length).toBeGreaterThan(2);
      expect(watch.sent.filter(([name]) => name === 'hmget')).toEqual([
        [`hmget`, `${app.queue.qualifiedName}:${live.id}`],
      ]);
      await live.remove();
    } finally {
      watch.stop();
    }
    await redis.del(running);
  }, 30_000);

  it('a look-up that fails leaves the refusal as it was: the new job ends through its strategy, not failed', async () => {
    const app = await start({
      module: { reaper: { interval: false } },
      unique,
      handler: async () => 'done',
    });
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const live = await app.queue.add('other', {}, { delay: 60_000, jobId: uniqueName('live') });
    await parkFor(redis, running, app, live.id!);
    const watch = watchCommands(libraryClient(app), (name) => {
      if (name === 'hmget') return Promise.reject(new Error('NOPERM simulated: the job hash cannot be read'));
    });
    try {
      const next = await app.queue.add('sync', { id: 'a' });
      await expect(app.finished(next)).resolves.toBeNull(); // logged: the live parked job holds the lock
    } finally {
      watch.stop();
    }
    await redis.del(running);
    await live.remove();
  }, 30_000);
});
