// Found by a hostile review (session 26): a key function that returned a Promise which then rejected (an async lookup)
// was reported as "an object" while the rejection went unhandled — Node ends a process on an unhandled rejection, so
// the worker died with every other job it ran. The same for a fingerprint function and for lockArgs. Now async
// functions are refused at bootstrap (naming the option), and a Promise returned at run time is reported as one, its
// rejection handled.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  InvalidUniqueJobOptionsError,
  MissingIdempotencyKeyError,
  RedisIdempotencyStore,
  UnrecoverableUniqueJobsError,
  UnserializableLockArgsError,
  type IdempotencyJob,
  type IdempotencyKeyOptions,
} from '../../lib/index.js';
import { strategyRegistry } from '../../lib/conflicts/index.js';
import { canonicalJson } from '../../lib/digest/canonical-json.js';
import { resolveIdempotencyOptions } from '../../lib/idempotency/idempotency-options.js';
import { resolveJobOptions } from '../../lib/options/job-options.js';
import { workerOf } from '../conflicts/helpers.js';
import { useApps } from '../support/apps.js';
import { Outcomes } from '../support/outcomes.js';
import { redisClient, uniqueName } from '../support/redis.js';

const unhandled: unknown[] = [];
const listener = (reason: unknown) => void unhandled.push(reason);
beforeAll(() => void process.on('unhandledRejection', listener));
beforeEach(() => void (unhandled.length = 0));
afterAll(() => void process.off('unhandledRejection', listener));

/** A function that is not `async` but returns a Promise that rejects (what an async lookup behind a wrapper does). */
const rejecting = (what: string) => () => Promise.reject(new Error(`${what} lookup failed`));

describe('async callbacks refused at bootstrap', () => {
  const client = redisClient({ lazyConnect: true });
  const stores = { default: new RedisIdempotencyStore({ client, prefix: uniqueName('prom') }), named: new Map() };
  afterAll(() => client.disconnect());

  it.each([
    [
      'key',
      { key: async (job: IdempotencyJob) => String(job.id) },
      /key must be synchronous and return the key itself/,
    ],
    [
      'fingerprint',
      { key: (job: IdempotencyJob) => String(job.id), fingerprint: async (data: unknown) => data },
      /fingerprint must be synchronous/,
    ],
    ['key', { key: function* key() {} }, /is a generator function/],
  ])('%s: an async function or a generator', (option, options, problem) => {
    let error: unknown;
    try {
      resolveIdempotencyOptions('Test', options as unknown as IdempotencyKeyOptions, undefined, stores);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
    expect((error as InvalidUniqueJobOptionsError).option).toBe(option);
    expect((error as InvalidUniqueJobOptionsError).problem).toMatch(problem);
  });
});

describe('what is not refused', () => {
  const client = redisClient({ lazyConnect: true });
  const stores = { default: new RedisIdempotencyStore({ client, prefix: uniqueName('prom') }), named: new Map() };
  afterAll(() => client.disconnect());

  // Review of session 26: a class was told by its source starting with "class", which a method named classroomId's
  // source does too.
  it('a method shorthand named class… is a function, not a class', () => {
    const methods = {
      classroomId(job: IdempotencyJob<{ classroomId: string }>) {
        return job.data.classroomId;
      },
      classify(data: { amount: number }) {
        return [data.amount];
      },
    };
    const options = { key: methods.classroomId, fingerprint: methods.classify };
    expect(() =>
      resolveIdempotencyOptions('Test', options as unknown as IdempotencyKeyOptions, undefined, stores),
    ).not.toThrow();
    expect(() =>
      resolveJobOptions(
        'Test',
        { lock: 'until_executed', lockArgs: methods.classify },
        {},
        strategyRegistry(),
        undefined,
      ),
    ).not.toThrow();
  });

  // The second look at that fix: a method named `class` (`class (d) {…}`) is a function too, and a class with a comment
  // after the keyword is still a class.
  it.each([
    [
      'a method named class',
      (
        {
          class(d: { id: string }) {
            return [d.id];
          },
        } as Record<string, (d: { id: string }) => unknown>
      ).class,
      undefined,
    ],
    ['a class with a comment after the keyword', class /* c */ Foo {}, /is a class, which cannot be called/],
  ])('lockArgs: %s', (_label, lockArgs, problem) => {
    let error: unknown;
    try {
      resolveJobOptions(
        'Test',
        { lock: 'until_executed', lockArgs: lockArgs as never },
        {},
        strategyRegistry(),
        undefined,
      );
    } catch (caught) {
      error = caught;
    }
    if (problem === undefined) expect(error).toBeUndefined();
    else expect((error as InvalidUniqueJobOptionsError).problem).toMatch(problem);
  });

  // Review of session 26: a lazy thenable (a Prisma, Knex or Mongoose query) runs its query when its `then` is called.
  it('a lazy thenable among lock arguments is refused without its then being called', () => {
    let runs = 0;
    const query = { then: (ok: (value: unknown) => unknown) => ok((runs += 1)) };
    expect(() => canonicalJson({ order: query })).toThrow(UnserializableLockArgsError);
    expect(runs).toBe(0);
  });
});

describe('a Promise returned at run time', () => {
  const { start } = useApps('prom');

  it.each([
    {
      part: 'key',
      // A missing key: the job fails with MissingIdempotencyKeyError naming a Promise.
      idempotency: { key: rejecting('key') as unknown as (job: IdempotencyJob) => string },
      error: MissingIdempotencyKeyError,
      message: 'a Promise (key functions must be synchronous)',
    },
    {
      part: 'fingerprint',
      // The fingerprint cannot be computed: the job fails for good.
      idempotency: {
        key: (job: IdempotencyJob<{ id: string }>) => job.data.id,
        fingerprint: rejecting('fingerprint') as unknown as (data: unknown) => unknown,
      },
      error: UnrecoverableUniqueJobsError,
      message: 'a Promise',
    },
  ])('$part: the job fails ($error.name) without running; the rejection is handled', async (row) => {
    const app = await start({ idempotency: row.idempotency, handler: async () => 'ran' });
    const outcomes = new Outcomes(workerOf(app));
    const job = await app.queue.add('charge', { id: `a-${row.part}` });
    const [error] = await outcomes.failures(job.id!);
    expect(error).toBeInstanceOf(row.error);
    expect(error.message).toContain(row.message);
    expect(app.runs).toHaveLength(0);
    expect(unhandled).toEqual([]);
  });

  it('lockArgs: the enqueue fails with UnserializableLockArgsError, nothing is enqueued; the rejection is handled', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: rejecting('lockArgs') as unknown as (data: unknown) => unknown[] },
      paused: true,
    });
    await expect(app.queue.add('price', { id: 'a3' })).rejects.toBeInstanceOf(UnserializableLockArgsError);
    expect(await app.queue.getJobCounts('waiting', 'delayed', 'prioritized')).toEqual({
      waiting: 0,
      delayed: 0,
      prioritized: 0,
    });
    expect(unhandled).toEqual([]);
  });
});
