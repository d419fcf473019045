// Property-based, against real Redis: a job whose lock arguments cannot be hashed canonically is refused at enqueue
// with UnserializableLockArgsError (naming where the bad value is), through queue.add, queue.addBulk and
// UniqueJobsService.enqueue, for every lock path (BullMQ deduplication, the library's own semaphore, run-time only), and
// leaves NOTHING in Redis: no job, no lock, no id, no event.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { UnserializableLockArgsError } from '../../lib/index.js';
import { startApp, type TestApp } from '../support/app.js';
import { bullPrefix, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { jsonish, planted, type Planted } from './arbitraries.js';

/** The job names of the app, one per lock path; `picked` ones hash what `lockArgs` returns (`data.args`). */
const NAMES = [
  { name: 'fast', picked: false }, // until_executed: the lock is BullMQ's deduplication key
  { name: 'expiring', picked: false }, // until_expired: the library's own enqueue lock
  { name: 'running', picked: true }, // while_executing: no enqueue lock, but the digest is still computed at enqueue
  { name: 'limited', picked: true }, // lockLimit 2, unique across queues: the library's semaphore
] as const;

const pickArgs = (data: { args: unknown }) => data.args;

/** A job name and data whose lock arguments hold one bad value, with the path the error must name. */
const badJob = fc.constantFrom(...NAMES).chain(({ name, picked }) =>
  planted(picked ? 'reject' : 'skip').map((p: Planted) => ({
    name,
    data: picked ? { args: p.value } : p.value,
    path: p.path,
  })),
);

describe('unserializable lock arguments at enqueue (real Redis)', () => {
  let app: TestApp;
  let redis: Redis;
  let before: string[];

  const keysNow = async () => [
    ...(await scanKeys(redis, `${bullPrefix()}:${app.queue.name}:*`)),
    ...(await scanKeys(redis, `${app.prefix}:*`)),
  ];

  /** Nothing was written: the same keys as before the first attempt, and no job in any state. */
  async function expectNothingWritten(): Promise<void> {
    expect(await keysNow()).toEqual(before);
    const counts = await app.queue.getJobCounts();
    expect(Object.values(counts).every((count) => count === 0)).toBe(true);
  }

  /** Asserts `attempt` rejects with an UnserializableLockArgsError naming `path`. */
  async function expectRefused(attempt: Promise<unknown>, path: string): Promise<void> {
    const error = await attempt.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UnserializableLockArgsError);
    expect((error as UnserializableLockArgsError).path).toBe(path);
  }

  beforeAll(async () => {
    redis = redisClient();
    app = await startApp({
      queue: uniqueName('prop-unser'),
      paused: true,
      unique: [
        { jobName: 'fast', lock: 'until_executed' },
        { jobName: 'expiring', lock: 'until_expired', lockTtl: 60_000 },
        { jobName: 'running', lock: 'while_executing', lockArgs: pickArgs },
        { jobName: 'limited', lock: 'until_executed', lockLimit: 2, uniqueAcross: 'queues', lockArgs: pickArgs },
      ],
    });
    before = await keysNow();
  });

  afterAll(async () => {
    await app?.close();
    await redis?.quit();
  });

  it('queue.add refuses them and writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(badJob, async ({ name, data, path }) => {
        await expectRefused(app.queue.add(name, data), path);
        await expectNothingWritten();
      }),
      { numRuns: 40 },
    );
  });

  it('UniqueJobsService.enqueue refuses them and writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(badJob, async ({ name, data, path }) => {
        await expectRefused(app.service.enqueue(app.queue, name, data), path);
        await expectNothingWritten();
      }),
      { numRuns: 25 },
    );
  });

  it('queue.addBulk with one bad entry among good ones refuses the whole batch and writes nothing', async () => {
    const goodJob = fc
      .constantFrom(...NAMES)
      .chain(({ name, picked }) => jsonish.map((value) => ({ name, data: picked ? { args: value } : { value } })));
    await fc.assert(
      fc.asyncProperty(
        fc.array(goodJob, { maxLength: 4 }),
        badJob,
        fc.nat(),
        async (good, { name, data, path }, at) => {
          const jobs = [...good];
          jobs.splice(at % (good.length + 1), 0, { name, data: data as { value: unknown } });
          await expectRefused(app.queue.addBulk(jobs), path);
          await expectNothingWritten();
        },
      ),
      { numRuns: 25 },
    );
  });

  it('control: a good job on each name does write (so the checks above can see a write)', async () => {
    for (const { name, picked } of NAMES) await app.queue.add(name, picked ? { args: [name] } : { id: name });
    expect(await app.queue.getJobCounts('wait')).toEqual({ wait: NAMES.length });
    expect((await keysNow()).length).toBeGreaterThan(before.length);
  });
});
