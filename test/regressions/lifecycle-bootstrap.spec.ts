// L6: timer options end up in setTimeout/setInterval, which take at most 2^31 − 1 ms (a larger delay fires after 1 ms):
// a larger value must fail the bootstrap, naming the option. L7: `@UniqueJob(undefined)` / `(null)` (and
// `@IdempotencyKey(undefined)`) must fail the bootstrap with InvalidUniqueJobOptionsError, not a raw TypeError.
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Processor, WorkerHost } from '@nestjs/bullmq';
import {
  IdempotencyKey,
  InvalidUniqueJobOptionsError,
  UniqueJob,
  type IdempotencyJob,
  type IdempotencyKeyOptions,
  type UniqueJobOptions,
  type UniqueJobsModuleOptions,
} from '../../lib/index.js';
import { bootstrapError, type BootOptions } from '../support/bootstrap.js';
import { uniqueName } from '../support/redis.js';

/** The largest delay Node's timers take. */
const MAX_TIMER = 2 ** 31 - 1;

/** A processor of `queue` with the given decorators (skipped when `undefined` is not meant as the options). */
function processor(
  name: string,
  queue: string,
  decorate: { unique?: UniqueJobOptions; idempotency?: IdempotencyKeyOptions },
): new () => WorkerHost {
  @Processor(queue, { autorun: false })
  class Dynamic extends WorkerHost {
    async process(): Promise<void> {}
  }
  Object.defineProperty(Dynamic, 'name', { value: name });
  if (decorate.unique) UniqueJob(decorate.unique)(Dynamic);
  if (decorate.idempotency) IdempotencyKey(decorate.idempotency)(Dynamic);
  return Dynamic;
}

const byOrder = (job: IdempotencyJob<{ id: string }>) => job.data.id;

/** Each timer option, as a bootstrap given its value. */
const TIMER_OPTIONS: [string, string, (value: number) => BootOptions][] = [
  [
    'forRoot({ defaults: { runtimeLockLease } })',
    'runtimeLockLease',
    (value) => {
      const queue = uniqueName('lcboot');
      const module: Partial<UniqueJobsModuleOptions> = { defaults: { runtimeLockLease: value } };
      return {
        queues: [queue],
        providers: [processor('LeaseDefaultProcessor', queue, { unique: { lock: 'while_executing' } })],
        module,
      };
    },
  ],
  [
    '@UniqueJob({ runtimeLockLease })',
    'runtimeLockLease',
    (value) => {
      const queue = uniqueName('lcboot');
      const unique: UniqueJobOptions = { lock: 'while_executing', runtimeLockLease: value };
      return { queues: [queue], providers: [processor('LeaseProcessor', queue, { unique })] };
    },
  ],
  [
    '@UniqueJob({ lockTimeout })',
    'lockTimeout',
    (value) => {
      const queue = uniqueName('lcboot');
      const unique: UniqueJobOptions = { lock: 'while_executing', lockTimeout: value };
      return { queues: [queue], providers: [processor('TimeoutProcessor', queue, { unique })] };
    },
  ],
  ['forRoot({ enqueueTimeout })', 'enqueueTimeout', (value) => ({ queues: [], module: { enqueueTimeout: value } })],
  ['forRoot({ shutdownTimeout })', 'shutdownTimeout', (value) => ({ queues: [], module: { shutdownTimeout: value } })],
  [
    'forRoot({ reaper: { interval } })',
    'interval',
    (value) => ({ queues: [], module: { reaper: { interval: value } } }),
  ],
  [
    '@IdempotencyKey({ lease })',
    'lease',
    (value) => {
      const queue = uniqueName('lcboot');
      const idempotency: IdempotencyKeyOptions = { key: byOrder, lease: value };
      return { queues: [queue], providers: [processor('IdempotencyLeaseProcessor', queue, { idempotency })] };
    },
  ],
];

describe('L6 timer options above 2^31 − 1 ms, L7 missing decorator options', () => {
  it.each(TIMER_OPTIONS)(
    'L6 %s of 2^31 ms fails the bootstrap with InvalidUniqueJobOptionsError naming the option',
    async (_label, option, boot) => {
      const error = await bootstrapError(boot(2 ** 31));
      // Today it is accepted: the timer would fire after 1 ms instead.
      expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
      expect((error as Error).message).toContain(option);
    },
  );

  it.each(TIMER_OPTIONS)('L6 %s of 2^31 − 1 ms is accepted', async (_label, _option, boot) => {
    expect(await bootstrapError(boot(MAX_TIMER))).toBeUndefined();
  });

  it.each([
    ['@UniqueJob(undefined)', 'UniqueJobUndefinedProcessor', UniqueJob(undefined as never)],
    ['@UniqueJob(null)', 'UniqueJobNullProcessor', UniqueJob(null as never)],
  ])(
    'L7 %s fails the bootstrap with InvalidUniqueJobOptionsError naming the processor',
    async (_label, name, decorator) => {
      const queue = uniqueName('lcboot');
      const Dynamic = processor(name, queue, {});
      decorator(Dynamic);
      const error = await bootstrapError({ queues: [queue], providers: [Dynamic] });
      // Today: a TypeError ("Cannot use 'in' operator to search for 'queue' in undefined", or similar).
      expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
      expect((error as Error).message).toContain(name);
    },
  );
});

describe('from the hostile review of issue 16', () => {
  it('two option sets whose digests can be equal (uniqueAcross names) but whose locks differ fail the bootstrap', async () => {
    const queue = uniqueName('lcboot');
    const Dynamic = processor('AcrossNamesProcessor', queue, {});
    const byId = (data: { id: string }) => data.id;
    UniqueJob({ jobName: 'b', lock: 'until_executed', lockArgs: byId, uniqueAcross: 'names', lockLimit: 2 })(Dynamic);
    UniqueJob({ jobName: 'a', lock: 'until_executed', lockArgs: byId, uniqueAcross: 'names' })(Dynamic);
    const error = await bootstrapError({ queues: [queue], providers: [Dynamic] });
    // Before: accepted, and a job "a" and a job "b" of one digest were judged by two locks (both ran).
    expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
    expect((error as InvalidUniqueJobOptionsError).option).toBe('lockLimit');
    expect((error as Error).message).toContain('uniqueAcross: names');
  });

  it('the same options for several names across names are accepted', async () => {
    const queue = uniqueName('lcboot');
    const Dynamic = processor('AcrossNamesAlikeProcessor', queue, {});
    const byId = (data: { id: string }) => data.id;
    UniqueJob({ jobName: 'b', lock: 'until_executed', lockArgs: byId, uniqueAcross: 'names', onConflict: 'reject' })(
      Dynamic,
    );
    UniqueJob({ jobName: 'a', lock: 'until_executed', lockArgs: byId, uniqueAcross: 'names' })(Dynamic);
    expect(await bootstrapError({ queues: [queue], providers: [Dynamic] })).toBeUndefined();
  });
});
