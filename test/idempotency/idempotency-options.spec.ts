// Invalid @IdempotencyKey options and forRoot({ idempotency }) options fail the application at bootstrap with an
// InvalidUniqueJobOptionsError naming where the options came from, the option, and the valid values.
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Redis } from 'ioredis';
import {
  IdempotencyKey,
  InvalidUniqueJobOptionsError,
  RedisIdempotencyStore,
  type IdempotencyJob,
  type IdempotencyKeyOptions,
  type IdempotencyModuleOptions,
  type IdempotencyStore,
} from '../../lib/index.js';
import { uniqueName } from '../support/redis.js';
import { bootstrapError, invalidOptions, type BootOptions } from '../support/bootstrap.js';

/** Options as a user might mistype them (the type system would catch most of these in TypeScript). */
const loose = (options: Record<string, unknown>) => options as unknown as IdempotencyKeyOptions;

const byEvent = (job: IdempotencyJob<{ eventId: string }>) => job.data.eventId;

const OPTION_NAMES = [
  'key',
  'jobName',
  'scope',
  'fingerprint',
  'store',
  'transactional',
  'ttl',
  'lease',
  'onInProgress',
  'onFailure',
  'onMissingKey',
  'maxResultBytes',
];
const DEFAULT_NAMES = ['ttl', 'lease', 'onInProgress', 'onFailure', 'onMissingKey', 'maxResultBytes'];
const STORE_METHODS = ['claim', 'renew', 'complete', 'fail', 'release', 'get', 'delete'];

/** A processor of `queue` named `name`, decorated with `@IdempotencyKey(options)` for each entry (topmost first). */
function processor(name: string, queue: string, keys: IdempotencyKeyOptions[]): new () => WorkerHost {
  @Processor(queue, { autorun: false })
  class Dynamic extends WorkerHost {
    async process(): Promise<void> {}
  }
  Object.defineProperty(Dynamic, 'name', { value: name });
  for (const options of [...keys].reverse()) IdempotencyKey(options)(Dynamic);
  return Dynamic;
}

/** The bootstrap error of one processor with one `@IdempotencyKey(options)`. */
async function invalidKeyOptions(
  options: IdempotencyKeyOptions,
  module?: BootOptions['module'],
): Promise<InvalidUniqueJobOptionsError> {
  const queue = uniqueName('ival');
  const error = await invalidOptions({
    queues: [queue],
    providers: [processor('ChargeProcessor', queue, [options])],
    ...(module ? { module } : {}),
  });
  expect(error.source).toBe('ChargeProcessor (@IdempotencyKey #1)');
  expect(error.message).toContain('ChargeProcessor');
  return error;
}

describe('invalid @IdempotencyKey options fail the bootstrap', () => {
  it('an unknown option (a typo like leaseMs) lists the valid options', async () => {
    const error = await invalidKeyOptions(loose({ key: byEvent, leaseMs: 5_000 }));
    expect(error.option).toBe('leaseMs');
    expect(error.message).toContain('"leaseMs" is not an option');
    for (const name of OPTION_NAMES) expect(error.message).toContain(name);
  });

  it.each<[string, Record<string, unknown>]>([
    ['a missing key', { scope: 'payments' }],
    ['a key that is a field name, not a function', { key: 'eventId' }],
    ['a null key', { key: null }],
  ])('%s', async (_label, options) => {
    const error = await invalidKeyOptions(loose(options));
    expect(error.option).toBe('key');
    expect(error.message).toContain('"key" must be a function');
    expect(error.message).toContain('job => job.data.eventId');
  });

  it.each<[string, Record<string, unknown>, string, string, string]>([
    ['ttl 0', { ttl: 0 }, 'ttl', '≥ 1', '0'],
    ['a negative ttl', { ttl: -5 }, 'ttl', '≥ 1', '-5'],
    ['a fractional ttl', { ttl: 1.5 }, 'ttl', '≥ 1', '1.5'],
    ['a ttl given as a string', { ttl: '1000' }, 'ttl', '≥ 1', '"1000"'],
    ['an infinite ttl', { ttl: Infinity }, 'ttl', '≥ 1', 'Infinity'],
    ['a lease below 100 ms', { lease: 99 }, 'lease', '≥ 100', '99'],
    ['lease 0', { lease: 0 }, 'lease', '≥ 100', '0'],
    ['a fractional lease', { lease: 1000.5 }, 'lease', '≥ 100', '1000.5'],
  ])('%s', async (_label, options, option, bound, got) => {
    const error = await invalidKeyOptions(loose({ key: byEvent, ...options }));
    expect(error.option).toBe(option);
    expect(error.message).toContain(`"${option}" must be an integer ${bound} (milliseconds)`);
    expect(error.message).toContain(`(got ${got})`);
  });

  it.each<[string, unknown, string]>([
    ['a negative maxResultBytes', -1, 'must be an integer ≥ 0 (bytes) (got -1)'],
    ['a maxResultBytes given as a string', '1mb', 'must be an integer ≥ 0 (bytes) (got "1mb")'],
    ['an infinite maxResultBytes', Infinity, 'must be an integer ≥ 0 (bytes) (got Infinity)'],
    ['a maxResultBytes past 512 MiB', 536_870_913, 'must be at most 536870912 (bytes) (got 536870913)'],
  ])('%s', async (_label, maxResultBytes, problem) => {
    const error = await invalidKeyOptions(loose({ key: byEvent, maxResultBytes }));
    expect(error.option).toBe('maxResultBytes');
    expect(error.message).toContain(`"maxResultBytes" ${problem}`);
  });

  it.each<[string, string, string[]]>([
    ['onInProgress', 'wait', ['delay', 'fail']],
    ['onInProgress', 'Delay', ['delay', 'fail']],
    ['onFailure', 'retry', ['release', 'keep']],
    ['onMissingKey', 'skip', ['error', 'run']],
  ])('%s: %j lists the valid values', async (option, value, valid) => {
    const error = await invalidKeyOptions(loose({ key: byEvent, [option]: value }));
    expect(error.option).toBe(option);
    expect(error.message).toContain(`"${option}" must be one of ${valid.map((v) => `'${v}'`).join(', ')}`);
    expect(error.message).toContain(`(got "${value}")`);
  });

  it.each<[string, unknown]>([
    ['an empty list', []],
    ['a list with an empty field name', ['amount', '']],
    ['a list with a number', ['amount', 3]],
    ['an unknown word', 'payload'],
    ['true', true],
    ['a number', 42],
  ])('fingerprint: %s', async (_label, fingerprint) => {
    const error = await invalidKeyOptions(loose({ key: byEvent, fingerprint }));
    expect(error.option).toBe('fingerprint');
    expect(error.message).toContain(
      '"fingerprint" must be \'data\', false, a non-empty list of top-level field names, or a function of the data',
    );
  });

  it.each<[string, unknown]>([
    ['an empty list', []],
    ['an empty name', ''],
    ['a list with an empty name', ['charge', '']],
  ])('jobName: %s', async (_label, jobName) => {
    const error = await invalidKeyOptions(loose({ key: byEvent, jobName }));
    expect(error.option).toBe('jobName');
    expect(error.message).toContain('non-empty job name');
  });

  it('an empty scope', async () => {
    const error = await invalidKeyOptions(loose({ key: byEvent, scope: '' }));
    expect(error.option).toBe('scope');
    expect(error.message).toContain('"scope" must be a non-empty string');
  });

  it('an unknown store name lists the stores of forRoot', async () => {
    const error = await invalidKeyOptions({ key: byEvent, store: 'sql' }, (client) => ({
      idempotency: {
        stores: {
          secondary: new RedisIdempotencyStore({ client, prefix: uniqueName('s1') }),
          audit: new RedisIdempotencyStore({ client, prefix: uniqueName('s2') }),
        },
      },
    }));
    expect(error.option).toBe('store');
    expect(error.message).toContain('(got "sql")');
    expect(error.message).toContain('stores from forRoot({ idempotency: { stores } }): secondary, audit');
  });

  it('a store name when forRoot declares no stores says there are none, and how to pick the default one', async () => {
    const error = await invalidKeyOptions({ key: byEvent, store: 'redis' });
    expect(error.option).toBe('store');
    expect(error.message).toContain('(got "redis")');
    expect(error.message).toMatch(
      /stores from forRoot\(\{ idempotency: \{ stores \} \}\): none; leave "store" out for the default store \(redis\)$/,
    );
  });

  it('transactional: true on the Redis store (no transactions)', async () => {
    const error = await invalidKeyOptions({ key: byEvent, transactional: true });
    expect(error.option).toBe('transactional');
    expect(error.message).toContain('needs a store with transactions (a SQL store: PostgreSQL or SQLite');
    expect(error.message).toContain('store "redis" has none');
  });

  it('transactional: true on a named Redis store, too', async () => {
    const error = await invalidKeyOptions({ key: byEvent, store: 'cache', transactional: true }, (client) => ({
      idempotency: { stores: { cache: new RedisIdempotencyStore({ client, prefix: uniqueName('s') }) } },
    }));
    expect(error.option).toBe('transactional');
    // Named as registered, not by the store's class.
    expect(error.message).toContain('store "cache" has none');
  });

  it('transactional that is not a boolean', async () => {
    const error = await invalidKeyOptions(loose({ key: byEvent, transactional: 'yes' }));
    expect(error.option).toBe('transactional');
    expect(error.message).toContain('must be true or false');
  });

  it('two @IdempotencyKey without job names (both for every name)', async () => {
    const queue = uniqueName('ival');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('TwiceProcessor', queue, [{ key: byEvent }, { key: byEvent, ttl: 1_000 }])],
    });
    expect(error.source).toBe('TwiceProcessor (@IdempotencyKey #2)');
    expect(error.option).toBe('jobName');
    expect(error.message).toContain('every job name');
    expect(error.message).toContain('already has idempotency options (from TwiceProcessor (@IdempotencyKey #1))');
  });

  it('two @IdempotencyKey with overlapping job names', async () => {
    const queue = uniqueName('ival');
    @Processor(queue, { autorun: false })
    @IdempotencyKey({ key: byEvent, jobName: ['charge', 'refund'] })
    @IdempotencyKey({ key: byEvent, jobName: ['refund', 'payout'] })
    class OverlapProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [queue], providers: [OverlapProcessor] });
    expect(error.source).toBe('OverlapProcessor (@IdempotencyKey #2)');
    expect(error.option).toBe('jobName');
    expect(error.message).toContain('job "refund"');
    expect(error.message).toContain('OverlapProcessor (@IdempotencyKey #1)');
  });

  it('an @IdempotencyKey class without @Processor', async () => {
    @Injectable()
    @IdempotencyKey(byEvent)
    class NotAProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [uniqueName('ival')], providers: [NotAProcessor] });
    expect(error.source).toBe('NotAProcessor');
    expect(error.option).toBe('@IdempotencyKey');
    expect(error.message).toContain('@Processor');
  });
});

describe('invalid forRoot({ idempotency }) options fail the bootstrap', () => {
  const moduleError = async (idempotency: IdempotencyModuleOptions | ((client: Redis) => IdempotencyModuleOptions)) => {
    const error = await invalidOptions({
      queues: [uniqueName('ival')],
      module: (client) => ({ idempotency: typeof idempotency === 'function' ? idempotency(client) : idempotency }),
    });
    expect(error.source).toBe('UniqueJobsModule.forRoot');
    return error;
  };

  it.each<[string, Record<string, unknown>, string, string]>([
    ['a lease below 100 ms', { lease: 10 }, 'lease', 'must be an integer ≥ 100 (milliseconds) (got 10)'],
    ['ttl 0', { ttl: 0 }, 'ttl', 'must be an integer ≥ 1 (milliseconds) (got 0)'],
    ['an unknown onFailure', { onFailure: 'never' }, 'onFailure', "must be one of 'release', 'keep'"],
    ['an unknown onInProgress', { onInProgress: 'queue' }, 'onInProgress', "must be one of 'delay', 'fail'"],
    ['an unknown onMissingKey', { onMissingKey: 'skip' }, 'onMissingKey', "must be one of 'error', 'run'"],
  ])('defaults with %s', async (_label, defaults, option, problem) => {
    const error = await moduleError({ defaults: defaults });
    expect(error.option).toBe(`idempotency.defaults.${option}`);
    expect(error.message).toContain(`"idempotency.defaults.${option}" ${problem}`);
  });

  it.each(['leese', 'key', 'scope'])('a key that is not a default: %s', async (key) => {
    const error = await moduleError({ defaults: { [key]: 1 } });
    expect(error.option).toBe(`idempotency.defaults.${key}`);
    expect(error.message).toContain(`valid: ${DEFAULT_NAMES.join(', ')}`);
  });

  it('an unknown key in the idempotency options', async () => {
    const error = await moduleError({ stor: {} } as unknown as IdempotencyModuleOptions);
    expect(error.option).toBe('idempotency.stor');
    expect(error.message).toContain('valid: store, stores, defaults');
  });

  it('a default store that is not a store', async () => {
    const error = await moduleError({ store: {} as IdempotencyStore });
    expect(error.option).toBe('idempotency.store');
    expect(error.message).toContain(`is not an IdempotencyStore: it lacks ${STORE_METHODS.join(', ')}`);
  });

  it('a named store that is not a store names the option idempotency.stores.<name>', async () => {
    const half = { name: 'half', claim: async () => undefined, get: async () => undefined };
    const error = await moduleError((client) => ({
      stores: {
        main: new RedisIdempotencyStore({ client, prefix: uniqueName('s') }),
        sql: half as unknown as IdempotencyStore,
      },
    }));
    expect(error.message).toContain('is not an IdempotencyStore: it lacks renew, complete, fail, release, delete');
    // Regression: this was reported as "idempotency.sql", the path of no option.
    expect(error.option).toBe('idempotency.stores.sql');
  });

  it('a named store called "store" is not mistaken for the default store', async () => {
    const error = await moduleError({ stores: { store: {} as IdempotencyStore } });
    expect(error.option).toBe('idempotency.stores.store');
  });

  it('a default store that is null', async () => {
    const error = await moduleError({ store: null as unknown as IdempotencyStore });
    expect(error.option).toBe('idempotency.store');
    expect(error.message).toContain('is not an IdempotencyStore');
  });

  it('a named store that is null', async () => {
    const error = await moduleError({ stores: { sql: null as unknown as IdempotencyStore } });
    expect(error.message).toContain(`is not an IdempotencyStore: it lacks ${STORE_METHODS.join(', ')}`);
  });
});

describe('valid idempotency options boot (control for the cases above)', () => {
  it('every option, a named store, module defaults, and two decorators for distinct job names', async () => {
    const queue = uniqueName('ival');
    @Processor(queue, { autorun: false })
    @IdempotencyKey({
      key: (job: IdempotencyJob<{ eventId: string; amount: number; currency: string }>) => job.data.eventId,
      jobName: ['charge', 'capture'],
      scope: 'payments',
      fingerprint: ['amount', 'currency'],
      store: 'secondary',
      transactional: false,
      ttl: 1,
      lease: 100,
      onInProgress: 'fail',
      onFailure: 'keep',
      onMissingKey: 'run',
    })
    @IdempotencyKey({ key: (job) => job.id, jobName: 'refund', fingerprint: false })
    @IdempotencyKey({ key: byEvent, fingerprint: (data) => data })
    class FullProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await bootstrapError({
      queues: [queue],
      providers: [FullProcessor],
      module: (client) => ({
        idempotency: {
          stores: { secondary: new RedisIdempotencyStore({ client, prefix: uniqueName('s') }) },
          defaults: { ttl: 60_000, lease: 5_000, onInProgress: 'delay', onFailure: 'release', onMissingKey: 'error' },
        },
      }),
    });
    expect(error).toBeUndefined();
  });

  it('the function form of @IdempotencyKey', async () => {
    const queue = uniqueName('ival');
    @Processor(queue, { autorun: false })
    @IdempotencyKey(byEvent)
    class FunctionFormProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    expect(await bootstrapError({ queues: [queue], providers: [FunctionFormProcessor] })).toBeUndefined();
  });
});
