// Property-based: every malformed @UniqueJob, job definition, @IdempotencyKey or forRoot option set is refused with an
// InvalidUniqueJobOptionsError that names the option and its valid values, whatever the wrong value is (wrong types,
// BigInt, symbols, circular objects, NaN, floats, negative numbers, unknown names, typos, combinations the lock
// forbids), and every well-formed one is accepted. The bulk of the runs call the validators directly; a few go through a
// real Nest bootstrap, which must fail the same way.
import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import { Processor, WorkerHost } from '@nestjs/bullmq';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import {
  defineUniqueJob,
  IdempotencyKey,
  InvalidUniqueJobOptionsError,
  RedisIdempotencyStore,
  SqliteIdempotencyStore,
  UniqueJob,
  type IdempotencyKeyOptions,
  type UniqueJobDefinition,
  type UniqueJobOptions,
  type UniqueJobsModuleOptions,
} from '../../lib/index.js';
import { resolveIdempotencyOptions } from '../../lib/idempotency/idempotency-options.js';
import { resolveJobOptions } from '../../lib/options/job-options.js';
import { validateModuleOptions } from '../../lib/options/module-options.js';
import { bootstrapError, invalidOptions } from '../support/bootstrap.js';
import { redisOptions, uniqueName } from '../support/redis.js';
import {
  junk,
  malformedIdempotency,
  malformedJob,
  malformedModule,
  PickingProcessor,
  REGISTRY,
  validIdempotency,
  validJobOptions,
  validModule,
  type Corruption,
} from './option-arbitraries.js';

/** Asserts `error` reports one of the faults: the option, its hints, and where the options came from. */
function expectReported(error: unknown, faults: Corruption[], source: string): void {
  expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
  const invalid = error as InvalidUniqueJobOptionsError;
  expect(faults.map((f) => f.option)).toContain(invalid.option);
  expect(invalid.source).toBe(source);
  expect(invalid.message).toContain(source);
  expect(invalid.message).toContain(`"${invalid.option}"`);
  for (const hint of faults.find((f) => f.option === invalid.option)!.hints) expect(invalid.message).toContain(hint);
}

/** What `fn` threw (or `undefined`). */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

// Real stores for the idempotency validator: a Redis store on a client that never connects (validation makes no call),
// and a SQLite store (the one with transactions).
const lazyRedis = new Redis({ ...redisOptions(), lazyConnect: true });
const sqlite = new Database(':memory:');
const STORES = {
  default: new RedisIdempotencyStore({ client: lazyRedis, prefix: uniqueName('prop') }),
  named: new Map<string, RedisIdempotencyStore | SqliteIdempotencyStore>([
    ['sql', new SqliteIdempotencyStore({ database: sqlite })],
    ['cache', new RedisIdempotencyStore({ client: lazyRedis, prefix: uniqueName('prop') })],
  ]),
};
afterAll(() => {
  sqlite.close();
  lazyRedis.disconnect();
});

describe('option validation (property-based, calling the validators)', () => {
  it('every well-formed @UniqueJob option set (and job definition) is accepted', () => {
    fc.assert(
      fc.property(
        fc.boolean().chain((definition) => validJobOptions(definition).map((v) => ({ ...v, definition }))),
        ({ options, definition }) => {
          const error = thrownBy(() =>
            resolveJobOptions(
              'Valid',
              options as unknown as UniqueJobOptions,
              undefined,
              REGISTRY,
              definition ? undefined : PickingProcessor,
            ),
          );
          expect(error).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });

  it('every malformed @UniqueJob option set is refused, naming the option and the valid values', () => {
    fc.assert(
      fc.property(malformedJob(false), ({ options, faults }) => {
        const error = thrownBy(() =>
          resolveJobOptions(
            'SettleProcessor (@UniqueJob #1)',
            options as unknown as UniqueJobOptions,
            undefined,
            REGISTRY,
            PickingProcessor,
          ),
        );
        expectReported(error, faults, 'SettleProcessor (@UniqueJob #1)');
      }),
      { numRuns: 400 },
    );
  });

  it('every malformed job definition (forRoot jobs) is refused the same way', () => {
    fc.assert(
      fc.property(malformedJob(true), ({ options, faults }) => {
        const source = 'forRoot jobs[0] (queue "payments")';
        const error = thrownBy(() =>
          resolveJobOptions(source, options as unknown as UniqueJobDefinition, undefined, REGISTRY, undefined),
        );
        expectReported(error, faults, source);
      }),
      { numRuns: 300 },
    );
  });

  it('every well-formed @IdempotencyKey option set is accepted; every malformed one refused, naming the option', () => {
    fc.assert(
      fc.property(validIdempotency, (options) => {
        const error = thrownBy(() =>
          resolveIdempotencyOptions('Valid', options as unknown as IdempotencyKeyOptions, undefined, STORES),
        );
        expect(error).toBeUndefined();
      }),
      { numRuns: 200 },
    );
    fc.assert(
      fc.property(malformedIdempotency, ({ options, faults }) => {
        const source = 'SettleProcessor (@IdempotencyKey #1)';
        const error = thrownBy(() =>
          resolveIdempotencyOptions(source, options as unknown as IdempotencyKeyOptions, undefined, STORES),
        );
        expectReported(error, faults, source);
      }),
      { numRuns: 400 },
    );
  });

  it('every well-formed forRoot option set is accepted; every malformed one refused, naming the option', () => {
    fc.assert(
      fc.property(validModule, (options) => {
        expect(thrownBy(() => validateModuleOptions(options as UniqueJobsModuleOptions))).toBeUndefined();
      }),
      { numRuns: 200 },
    );
    fc.assert(
      fc.property(malformedModule, ({ options, faults }) => {
        const error = thrownBy(() => validateModuleOptions(options));
        expectReported(error, faults, 'UniqueJobsModule.forRoot');
      }),
      { numRuns: 400 },
    );
    fc.assert(
      fc.property(
        junk.filter((v) => typeof v !== 'object' || v === null || Array.isArray(v)),
        (options) => {
          const error = thrownBy(() => validateModuleOptions(options as UniqueJobsModuleOptions));
          expectReported(
            error,
            [{ option: 'options', hints: ['must be an object'], apply: () => undefined }],
            'UniqueJobsModule.forRoot',
          );
        },
      ),
      { numRuns: 50 },
    );
  });
});

/** A processor of `queue` with `@UniqueJob` / `@IdempotencyKey` options as given (not type-checked: malformed). */
function processorWith(queue: string, decorate: (target: new () => WorkerHost) => void): new () => WorkerHost {
  @Processor(queue, { autorun: false })
  class SettleProcessor extends WorkerHost {
    static pick(data: { id: string }): string {
      return data.id;
    }
    async process(): Promise<void> {}
  }
  decorate(SettleProcessor);
  return SettleProcessor;
}

describe('option validation through a real Nest bootstrap (a few runs each)', () => {
  it('a malformed @UniqueJob fails the bootstrap with the same error', async () => {
    await fc.assert(
      fc.asyncProperty(malformedJob(false), async ({ options, faults }) => {
        const queue = uniqueName('prop-val');
        const error = await invalidOptions({
          queues: [queue],
          providers: [processorWith(queue, (target) => UniqueJob(options as unknown as UniqueJobOptions)(target))],
        });
        expectReported(error, faults, 'SettleProcessor (@UniqueJob #1)');
      }),
      { numRuns: 12 },
    );
  });

  it('a malformed forRoot job definition fails the bootstrap with the same error', async () => {
    await fc.assert(
      fc.asyncProperty(malformedJob(true), async ({ options, faults }) => {
        const queue = uniqueName('prop-val');
        const definition = defineUniqueJob({ ...(options as unknown as UniqueJobDefinition) });
        const error = await invalidOptions({ queues: [queue], module: { jobs: [definition] } });
        expect(error.source).toMatch(/^forRoot jobs\[0\]/);
        expectReported(error, faults, error.source);
      }),
      { numRuns: 6 },
    );
  });

  it('a malformed @IdempotencyKey fails the bootstrap with the same error', async () => {
    await fc.assert(
      fc.asyncProperty(malformedIdempotency, async ({ options, faults }) => {
        const queue = uniqueName('prop-val');
        const error = await invalidOptions({
          queues: [queue],
          module: (client) => ({
            idempotency: {
              stores: {
                sql: new SqliteIdempotencyStore({ database: sqlite }),
                cache: new RedisIdempotencyStore({ client, prefix: uniqueName('prop') }),
              },
            },
          }),
          providers: [
            processorWith(queue, (target) => IdempotencyKey(options as unknown as IdempotencyKeyOptions)(target)),
          ],
        });
        expectReported(error, faults, 'SettleProcessor (@IdempotencyKey #1)');
      }),
      { numRuns: 8 },
    );
  });

  it('malformed forRoot options fail the bootstrap with the same error', async () => {
    await fc.assert(
      fc.asyncProperty(malformedModule, async ({ options, faults }) => {
        const error = await invalidOptions({
          queues: [uniqueName('prop-val')],
          module: options,
        });
        expectReported(error, faults, 'UniqueJobsModule.forRoot');
      }),
      { numRuns: 12 },
    );
  });

  it('control: a generated well-formed @UniqueJob boots', async () => {
    await fc.assert(
      fc.asyncProperty(validJobOptions(false), async ({ options }) => {
        const queue = uniqueName('prop-val');
        const error = await bootstrapError({
          queues: [queue],
          providers: [processorWith(queue, (target) => UniqueJob(options as unknown as UniqueJobOptions)(target))],
        });
        expect(error).toBeUndefined();
      }),
      { numRuns: 2 },
    );
  });
});
