// Options that can be told invalid at bootstrap are refused there, naming the option, in a bounded message: lockArgs
// that is an async function, a generator or a class; maxReschedules (a count, not milliseconds); a default onConflict
// side no strategy of that name applies on; a megabyte of invalid value; a connection that is neither options nor a
// client.
import { describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { InvalidUniqueJobOptionsError, type UniqueJobOptions } from '../../lib/index.js';
import { strategyRegistry } from '../../lib/conflicts/index.js';
import { resolveJobOptions } from '../../lib/options/job-options.js';
import { validateModuleOptions } from '../../lib/options/module-options.js';
import { redisOptions } from '../support/redis.js';

function jobError(options: Record<string, unknown>, processorClass?: object): InvalidUniqueJobOptionsError {
  try {
    resolveJobOptions(
      'Test (@UniqueJob #1)',
      options as unknown as UniqueJobOptions,
      {},
      strategyRegistry(),
      processorClass,
    );
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
    return error as InvalidUniqueJobOptionsError;
  }
  throw new Error('accepted');
}

function moduleError(options: Record<string, unknown>): InvalidUniqueJobOptionsError {
  try {
    validateModuleOptions(options);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
    return error as InvalidUniqueJobOptionsError;
  }
  throw new Error('accepted');
}

describe('options refused at bootstrap, with bounded messages', () => {
  it.each([
    ['an async function', async (d: { id: string }) => [d.id], /is an async function, which returns a Promise/],
    ['an async generator', async function* lockArgs() {}, /is an async function/],
    ['a generator', function* lockArgs() {}, /is a generator function/],
    ['a class', class LockArgs {}, /is a class, which cannot be called/],
  ])('lockArgs: %s', (_label, lockArgs, problem) => {
    const error = jobError({ lock: 'until_executed', lockArgs });
    expect(error.option).toBe('lockArgs');
    expect(error.problem).toMatch(problem);
  });

  it('lockArgs naming an async static method of the processor', () => {
    class Processor {
      static async pick(d: { id: string }) {
        return [d.id];
      }
    }
    const error = jobError({ lock: 'until_executed', lockArgs: 'pick' }, Processor);
    expect(error.option).toBe('lockArgs');
    expect(error.problem).toMatch(/names "pick", an async function/);
  });

  it('lockArgs: a plain function, an arrow and a method still pass', () => {
    for (const lockArgs of [(d: { id: string }) => [d.id], function pick() {}, { m() {} }.m]) {
      expect(() =>
        resolveJobOptions('Test', { lock: 'until_executed', lockArgs }, {}, strategyRegistry(), undefined),
      ).not.toThrow();
    }
  });

  it('maxReschedules: NaN is "an integer ≥ 0", no unit', () => {
    const error = jobError({ lock: 'while_executing', onConflict: 'reschedule', maxReschedules: Number.NaN });
    expect(error.option).toBe('maxReschedules');
    expect(error.problem).toBe('must be an integer ≥ 0 (got NaN)');
    expect(moduleError({ defaults: { maxReschedules: -1 } }).problem).toBe('must be an integer ≥ 0 (got -1)');
  });

  // Found by session 35's new-user review: `reaper.interval` did not say it counts milliseconds.
  it('reaper times name their unit; batchSize (a count) does not', () => {
    const interval = moduleError({ reaper: { interval: '1m' } });
    expect(interval.option).toBe('reaper.interval');
    expect(interval.problem).toBe('must be an integer ≥ 1 (milliseconds) (got "1m"), or false');
    expect(moduleError({ reaper: { grace: -1 } }).problem).toBe('must be an integer ≥ 0 (milliseconds) (got -1)');
    expect(moduleError({ reaper: { batchSize: 0 } }).problem).toBe('must be an integer ≥ 1 (got 0)');
  });

  it.each([
    [
      { client: 'reschedule' },
      'defaults.onConflict.client',
      /"reschedule" cannot apply on the client side \(at enqueue\)/,
    ],
  ])('defaults.onConflict %j is blamed on forRoot, naming the side', (onConflict, option, problem) => {
    const error = moduleError({ defaults: { onConflict } });
    expect(error.source).toBe('UniqueJobsModule.forRoot');
    expect(error.option).toBe(option);
    expect(error.problem).toMatch(problem);
    expect(error.problem).toMatch(/valid .*-side strategies: /);
  });

  it("a string defaults.onConflict that does not fit a job's lock is blamed on the default, not on the job's options", () => {
    const resolve = (options: UniqueJobOptions) =>
      resolveJobOptions('Test (@UniqueJob #1)', options, { onConflict: 'reschedule' }, strategyRegistry(), undefined);
    let error: unknown;
    try {
      resolve({ lock: 'until_executing' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
    expect((error as InvalidUniqueJobOptionsError).option).toBe('defaults.onConflict');
    expect((error as InvalidUniqueJobOptionsError).problem).toMatch(
      /"reschedule" cannot apply on the client side .*\(forRoot's default, taken by this job: set onConflict on it\)$/,
    );
    // The job's own onConflict overrides the default; a lock the default fits takes it.
    expect(resolve({ lock: 'until_executing', onConflict: 'reject' }).strategies.client?.name).toBe('reject');
    expect(resolve({ lock: 'while_executing' }).strategies.server?.name).toBe('reschedule');
  });

  it('defaults.onConflict with each side a strategy of that side passes', () => {
    expect(() =>
      validateModuleOptions({ defaults: { onConflict: { client: 'reject', server: 'reschedule' } } }),
    ).not.toThrow();
  });

  it.each([
    ['a 1 MB lock name', () => jobError({ lock: 'x'.repeat(1_000_000) })],
    ['a 1 MB unknown option', () => jobError({ lock: 'until_executed', ['y'.repeat(1_000_000)]: 1 })],
    [
      'a 1 MB lockArgs method name',
      () => jobError({ lock: 'until_executed', lockArgs: 'z'.repeat(1_000_000) }, class {}),
    ],
    ['a 1 MB enabled', () => moduleError({ enabled: 'e'.repeat(1_000_000) })],
    ['a 1 MB forRoot key', () => moduleError({ ['k'.repeat(1_000_000)]: 1 })],
    ['a 1 MB default onConflict', () => moduleError({ defaults: { onConflict: 'o'.repeat(1_000_000) } })],
  ])('%s: the message stays short and gives the length', (_label, make) => {
    const error = make();
    expect(error.message.length).toBeLessThan(1_000);
    expect(error.message).toMatch(/… \(\d+ characters\)/);
  });

  it.each([
    ['a URL string', 'redis://127.0.0.1:6379/5'],
    ['a number', 42],
    ['an array', [{ host: '127.0.0.1' }]],
    ['a Map', new Map([['host', '127.0.0.1']])],
  ])('connection: %s is refused, naming the accepted forms', (_label, connection) => {
    const error = moduleError({ connection });
    expect(error.option).toBe('connection');
    expect(error.problem).toMatch(/must be ioredis connection options .* or an ioredis Redis or Cluster client/);
    expect(error.problem).toContain("{ url: '…' }");
  });

  it('connection: options (with or without url) and a client pass', async () => {
    const client = new Redis({ ...redisOptions(), lazyConnect: true });
    try {
      for (const connection of [
        redisOptions(),
        { url: 'redis://127.0.0.1:6379/5' },
        Object.create(null) as object,
        client,
      ]) {
        expect(() => validateModuleOptions({ connection })).not.toThrow();
      }
    } finally {
      client.disconnect();
    }
  });
});
