// Producer-side review. P1: an add answered by an existing job (a caller's `jobId` that already names a job: BullMQ
// returns that job and adds nothing) took no lock, and reports none. P2: a queue's `defaultJobOptions.deduplication`
// (BullMQ merges it into every add) does not decide for a unique job: the library's lock does. P3: a job added with
// `lockTtl`, a delay and a caller's `timestamp`, moved by a build without `lockTtl`, keeps its lock `lockTtl` past its
// new run time, not longer (a timestamp in the future) or shorter (in the past) by the time from its add to that
// timestamp, which its deduplication TTL counted.
import { describe, expect, it } from '@jest/globals';
import { Job, type DefaultJobOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { UniqueJobOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { byId, dedupKey, digestOf, expiringKey, owners, queuedKey } from '../support/locks.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('P1 an add answered by an existing job (a caller jobId) reports no lock', () => {
  const { redis, start } = useApps('prv-p1');

  const paths: [string, UniqueJobOptions][] = [
    ['fast path', { lock: 'until_executed', lockArgs: byId }],
    ['slot set (lockLimit 2)', { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }],
    ['slot set (until_expired)', { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 }],
  ];

  it.each(paths)(
    '%s: queue.add and addBulk of an existing jobId, same data or other, emit no locked event',
    async (_, unique) => {
      const app = await start({ unique, paused: true });
      const log = new EventLog(app);
      const first = await app.queue.add('sync', { id: 'a' }, { jobId: 'job-1' });
      expect(first.id).toBe('job-1');
      expect(log.of('locked')).toEqual([expect.objectContaining({ jobId: 'job-1', lock: 'enqueue' })]);
      // BullMQ answers both with job-1 and adds nothing: neither took a lock.
      expect((await app.queue.add('sync', { id: 'a' }, { jobId: 'job-1' })).id).toBe('job-1');
      expect((await app.queue.add('sync', { id: 'b' }, { jobId: 'job-1' })).id).toBe('job-1');
      const bulk = await app.queue.addBulk([
        { name: 'sync', data: { id: 'b' }, opts: { jobId: 'job-1' } },
        { name: 'sync', data: { id: 'c' }, opts: { jobId: 'job-2' } },
        { name: 'sync', data: { id: 'd' }, opts: { jobId: 'job-2' } },
      ]);
      expect(bulk.map((job) => job.id)).toEqual(['job-1', 'job-2', 'job-2']);
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
      expect(log.of('locked').map(({ jobId, digest }) => ({ jobId, digest }))).toEqual([
        { jobId: 'job-1', digest: digestOf(app, 'sync', { id: 'a' }) },
        { jobId: 'job-2', digest: digestOf(app, 'sync', { id: 'c' }) },
      ]);
      const holdOf = (id: string) =>
        unique.lockLimit === 2
          ? owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id })))
          : unique.lock === 'until_expired'
            ? owners(redis, expiringKey(app.prefix, digestOf(app, 'sync', { id })))
            : redis.get(dedupKey(app.queue.name, digestOf(app, 'sync', { id }))).then((v) => (v ? [v] : []));
      expect(await holdOf('b')).toEqual([]);
      expect(await holdOf('d')).toEqual([]);
    },
  );
});

describe('P1 (cost) with nobody listening for events, an add with a caller jobId is one command', () => {
  const { start } = useApps('prv-p1-cost');

  it('fast path: queue.add and addBulk of a caller jobId send no HEXISTS ahead of the add', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId }, paused: true });
    const connection = (await app.queue.getBackend().client) as unknown as Redis;
    const sent: string[] = [];
    const send = connection.sendCommand.bind(connection);
    connection.sendCommand = (command: Parameters<typeof send>[0]) => {
      sent.push(command.name.toLowerCase());
      return send(command);
    };
    try {
      expect((await app.queue.add('sync', { id: 'a' }, { jobId: 'job-1' })).id).toBe('job-1');
      expect((await app.queue.add('sync', { id: 'a' }, { jobId: 'job-1' })).id).toBe('job-1');
      await app.queue.addBulk([{ name: 'sync', data: { id: 'b' }, opts: { jobId: 'job-2' } }]);
    } finally {
      connection.sendCommand = send;
    }
    expect(sent.filter((name) => name === 'hexists')).toEqual([]);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
  });
});

// Found by a review (session 38): an add not watched when it began (no HEXISTS asked) reported `locked` when a
// subscriber came while it was on its way, for an add answered by an existing caller jobId (it took no lock).
describe('P4 a subscriber arriving while an unwatched add is on its way', () => {
  const { start } = useApps('prv-p4');

  it('gets no locked event for an add answered by an existing caller jobId', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId }, paused: true });
    expect((await app.queue.add('sync', { id: 'a' }, { jobId: 'job-1' })).id).toBe('job-1');
    const connection = (await app.queue.getBackend().client) as unknown as Redis;
    const send = connection.sendCommand.bind(connection);
    let log: EventLog | undefined;
    connection.sendCommand = (command: Parameters<typeof send>[0]) => {
      log ??= new EventLog(app); // subscribes with the add's first command sent: between its start and its answer
      return send(command);
    };
    try {
      expect((await app.queue.add('sync', { id: 'a' }, { jobId: 'job-1' })).id).toBe('job-1');
    } finally {
      connection.sendCommand = send;
    }
    expect(log).toBeDefined();
    expect(log!.of('locked')).toEqual([]);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });
});

describe('P2 a queue default deduplication does not decide for unique jobs', () => {
  const { redis, start } = useApps('prv-p2');
  // Not in BullMQ 6's DefaultJobOptions type, but merged into every add at run time (JavaScript, configuration files).
  const defaultJobOptions = { deduplication: { id: 'everything' } } as DefaultJobOptions;

  /** A definition, and how many jobs of one digest it admits (of the 3 added). */
  const cases: [string, UniqueJobOptions, number][] = [
    ['slot set (lockLimit 2)', { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, 2],
    ['slot set (until_expired)', { lock: 'until_expired', lockArgs: byId, lockTtl: 60_000 }, 1],
    ['fast path', { lock: 'until_executed', lockArgs: byId }, 1],
    ['no enqueue lock (while_executing)', { lock: 'while_executing', lockArgs: byId }, 3],
  ];

  it.each(cases)(
    '%s: jobs of other digests are added, a digest admits as many jobs as its lock allows',
    async (_, unique, holders) => {
      const app = await start({ unique, paused: true, queueOptions: { defaultJobOptions } });
      const statuses = [];
      for (const id of ['a', 'b']) statuses.push((await app.service.enqueue(app.queue, 'sync', { id })).status);
      const [bulked] = await app.queue.addBulk([{ name: 'sync', data: { id: 'c' } }]);
      for (let i = 0; i < 2; i++) statuses.push((await app.service.enqueue(app.queue, 'sync', { id: 'a' })).status);
      const tail = [2, 3].map((n) => (holders >= n ? 'enqueued' : 'duplicate'));
      expect(statuses).toEqual(['enqueued', 'enqueued', ...tail]);
      const waiting = await app.queue.getJobs(['waiting']);
      expect(waiting.map((job) => (job.data as { id: string }).id).sort()).toEqual([
        ...Array<string>(holders).fill('a'),
        'b',
        'c',
      ]);
      expect(waiting.map((job) => job.id)).toContain(bulked.id);
      expect(await redis.exists(`${bullPrefix()}:${app.queue.name}:de:everything`)).toBe(0);
    },
  );
});

describe('P3 lockTtl removed: a job added with a caller timestamp keeps its lock lockTtl past its moved run time', () => {
  const { redis, start } = useApps('prv-p3');
  const TTL = 60_000;
  const OFFSET = 10 * 60_000;
  const LATER = 5 * 60_000;

  /** An old build (with `lockTtl`) and a new one (without) on one queue; the new one's handler fails `runs` times. */
  async function deploy() {
    const module = { prefix: uniqueName('prv-p3p'), reaper: { interval: false as const } };
    const old = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockTtl: TTL }, paused: true, module });
    const neu = await start({
      queue: old.queue.name,
      unique: { lock: 'until_executed', lockArgs: byId },
      paused: true,
      handler: () => Promise.reject(new Error('fails')),
      module,
    });
    const key = dedupKey(neu.queue.name, digestOf(neu, 'sync', { id: 'p3' }));
    /** How long the lock outlives the job's run time, as BullMQ stored it (the job's score in `delayed`). */
    const pastRun = async (jobId: string) => {
      const [pttl, score] = await Promise.all([
        redis.pttl(key),
        redis.zscore(`${bullPrefix()}:${neu.queue.name}:delayed`, jobId),
      ]);
      return Date.now() + pttl - Math.floor(Number(score) / 0x1000);
    };
    return { old, neu, pastRun };
  }

  it.each([
    ['in the future (run time later than its delay from now)', OFFSET, 1_000],
    ['in the past (run time sooner than its delay from now)', -OFFSET, OFFSET + 60_000],
  ])('P3a guarded changeDelay on the new build, timestamp %s', async (_, offset, delay) => {
    const { old, neu, pastRun } = await deploy();
    const added = await old.queue.add('sync', { id: 'p3' }, { timestamp: Date.now() + offset, delay });
    expect(Math.abs((await pastRun(added.id!)) - TTL)).toBeLessThan(1_000); // the old build's lock: TTL past the run
    const job = (await Job.fromId(neu.queue, added.id!))!;
    await job.changeDelay(LATER);
    // Before: TTL + OFFSET past the new run time (future timestamp), or 1 ms (past timestamp).
    expect(Math.abs((await pastRun(added.id!)) - TTL)).toBeLessThan(1_000);
    await job.remove();
  });

  it('P3b a retry backoff on the new build, timestamp in the past', async () => {
    const { old, neu, pastRun } = await deploy();
    const retry = { attempts: 2, backoff: { type: 'fixed', delay: LATER } };
    const added = await old.queue.add(
      'sync',
      { id: 'p3' },
      { timestamp: Date.now() - OFFSET, delay: OFFSET, ...retry },
    );
    const failedOnce = new Promise<void>((resolve) => neu.worker!.once('failed', () => resolve()));
    neu.start();
    await failedOnce;
    expect(await neu.queue.getJobState(added.id!)).toBe('delayed');
    // The worker moves the lock past the retry's run time once BullMQ delayed the job. Before: 1 ms past it.
    await waitFor(
      'the lock to follow the backoff',
      async () => Math.abs((await pastRun(added.id!)) - TTL) < 1_000,
      3_000,
    );
    await neu.worker!.pause();
    await (await Job.fromId(neu.queue, added.id!))!.remove();
  });
});
