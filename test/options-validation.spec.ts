import 'reflect-metadata';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { Job } from 'bullmq';
import {
  defineUniqueJob,
  digest,
  IdempotencyKey,
  UniqueJob,
  type IdempotencyJob,
  type LockType,
  type UniqueJobDefinition,
  type UniqueJobOptions,
  type ConflictStrategy,
  type UniqueJobsModuleOptions,
} from '../lib/index.js';
import { startApp, type TestApp } from './support/app.js';
import { lockKeys, redisClient, redisOptions, uniqueName } from './support/redis.js';
import { bootstrapError, invalidOptions } from './support/bootstrap.js';

/** Options as a user might mistype them (the type system would catch most of these in TypeScript). */
const loose = (options: Record<string, unknown>) => options as unknown as UniqueJobOptions;

/** A processor of `queue` named `name`, decorated with `@UniqueJob(options)` for each entry (topmost first). */
function processor(
  name: string,
  queue: string,
  unique: (UniqueJobOptions | UniqueJobDefinition)[],
  statics: Record<string, unknown> = {},
): new () => WorkerHost {
  @Processor(queue, { autorun: false })
  class Dynamic extends WorkerHost {
    async process(): Promise<void> {}
  }
  Object.defineProperty(Dynamic, 'name', { value: name });
  Object.assign(Dynamic, statics);
  for (const options of [...unique].reverse()) UniqueJob(options)(Dynamic);
  return Dynamic;
}

const CLIENT_STRATEGIES = ['log', 'raise', 'reject', 'replace'];
const SERVER_STRATEGIES = ['log', 'raise', 'reject', 'reschedule'];
const LOCK_NAMES = [
  'until_executing',
  'until_executed',
  'until_expired',
  'while_executing',
  'until_and_while_executing',
];

describe('invalid unique-job options fail the bootstrap', () => {
  it('an unknown lock name', async () => {
    const queue = uniqueName('val');
    @Processor(queue, { autorun: false })
    @UniqueJob({ lock: 'until_done' as LockType })
    class SettlePaymentProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [queue], providers: [SettlePaymentProcessor] });
    expect(error.source).toBe('SettlePaymentProcessor (@UniqueJob #1)');
    expect(error.option).toBe('lock');
    expect(error.message).toContain('SettlePaymentProcessor');
    expect(error.message).toContain('"lock"');
    expect(error.message).toContain('"until_done"');
    for (const lock of LOCK_NAMES) expect(error.message).toContain(lock);
  });

  it('a missing lock', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('NoLockProcessor', queue, [loose({ onConflict: 'log' })])],
    });
    expect(error.option).toBe('lock');
    expect(error.message).toContain('NoLockProcessor');
    for (const lock of LOCK_NAMES) expect(error.message).toContain(lock);
  });

  it('an unknown strategy', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('UnknownStrategyProcessor', queue, [{ lock: 'until_executed', onConflict: 'ignore' }])],
    });
    expect(error.source).toContain('UnknownStrategyProcessor');
    expect(error.option).toBe('onConflict');
    expect(error.message).toContain('"ignore"');
    for (const strategy of CLIENT_STRATEGIES) expect(error.message).toContain(strategy);
    // Why `reschedule` is not among them (a worker-side strategy; this lock meets conflicts only at enqueue).
    expect(error.message).toContain('(the client-side strategies, at enqueue, where lock "until_executed" meets');
  });

  it.each([
    [
      'reschedule on until_executed (client side only)',
      { lock: 'until_executed', onConflict: 'reschedule' },
      'onConflict',
      'client',
      CLIENT_STRATEGIES,
    ],
    [
      'replace on while_executing (server side only)',
      { lock: 'while_executing', onConflict: 'replace' },
      'onConflict',
      'server',
      SERVER_STRATEGIES,
    ],
    [
      'replace on the server side of until_and_while_executing',
      { lock: 'until_and_while_executing', onConflict: 'replace' },
      'onConflict',
      'server',
      SERVER_STRATEGIES,
    ],
    [
      'reschedule as the client strategy',
      { lock: 'until_and_while_executing', onConflict: { client: 'reschedule', server: 'log' } },
      'onConflict.client',
      'client',
      CLIENT_STRATEGIES,
    ],
  ] as const)('a strategy that cannot apply on its side: %s', async (_label, options, option, side, valid) => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('SideProcessor', queue, [options])],
    });
    expect(error.source).toContain('SideProcessor');
    expect(error.option).toBe(option);
    expect(error.message).toContain(`${side} side`);
    expect(error.message).toContain(`valid ${side}-side strategies: ${valid.join(', ')}`);
  });

  it('a server strategy on a lock without run-time conflicts (until_executed)', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('ServerSideProcessor', queue, [{ lock: 'until_executed', onConflict: { server: 'log' } }])],
    });
    expect(error.source).toContain('ServerSideProcessor');
    expect(error.option).toBe('onConflict.server');
    expect(error.message).toContain('"until_executed"');
    expect(error.message).toMatch(/no server-side conflicts \(it has: client\)/);
  });

  it('a client strategy on a lock without enqueue conflicts (while_executing)', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [
        processor('ClientSideProcessor', queue, [{ lock: 'while_executing', onConflict: { client: 'raise' } }]),
      ],
    });
    expect(error.option).toBe('onConflict.client');
    expect(error.message).toMatch(/no client-side conflicts \(it has: server\)/);
  });

  it('an onConflict side that does not exist', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [
        processor('TypoSideProcessor', queue, [loose({ lock: 'until_executed', onConflict: { clinet: 'log' } })]),
      ],
    });
    expect(error.option).toBe('onConflict.clinet');
    expect(error.message).toContain('valid sides: client, server');
  });

  it('until_expired without lockTtl', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('ExpiringProcessor', queue, [{ lock: 'until_expired' }])],
    });
    expect(error.source).toContain('ExpiringProcessor');
    expect(error.option).toBe('lockTtl');
    expect(error.message).toContain('"until_expired"');
    expect(error.message).toContain('required');
  });

  it.each([
    ['a negative lockTimeout', { lock: 'while_executing', lockTimeout: -1 }, 'lockTimeout', '≥ 0', '-1'],
    ['a fractional lockTimeout', { lock: 'while_executing', lockTimeout: 1.5 }, 'lockTimeout', '≥ 0', '1.5'],
    ['lockLimit 0', { lock: 'until_executed', lockLimit: 0 }, 'lockLimit', '≥ 1', '0'],
    ['a non-number lockLimit', { lock: 'until_executed', lockLimit: '2' }, 'lockLimit', '≥ 1', '"2"'],
    ['lockTtl 0', { lock: 'until_expired', lockTtl: 0 }, 'lockTtl', '≥ 1', '0'],
    [
      'a runtimeLockLease below 100 ms',
      { lock: 'while_executing', runtimeLockLease: 10 },
      'runtimeLockLease',
      '≥ 100',
      '10',
    ],
    ['a negative maxReschedules', { lock: 'while_executing', maxReschedules: -2 }, 'maxReschedules', '≥ 0', '-2'],
  ])('%s', async (_label, options, option, bound, got) => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('NumbersProcessor', queue, [loose(options)])],
    });
    expect(error.source).toContain('NumbersProcessor');
    expect(error.option).toBe(option);
    expect(error.message).toContain(`"${option}"`);
    expect(error.message).toContain(`integer ${bound}`);
    expect(error.message).toContain(`(got ${got})`);
  });

  it('lockArgs naming a static method that does not exist', async () => {
    const queue = uniqueName('val');
    @Processor(queue, { autorun: false })
    @UniqueJob({ lock: 'until_executed', lockArgs: 'lockArgz' })
    class TypoLockArgsProcessor extends WorkerHost {
      static lockArgs(data: { id: string }) {
        return data.id;
      }
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [queue], providers: [TypoLockArgsProcessor] });
    expect(error.source).toBe('TypoLockArgsProcessor (@UniqueJob #1)');
    expect(error.option).toBe('lockArgs');
    expect(error.message).toContain('"lockArgz"');
    expect(error.message).toContain('static method');
  });

  it('lockArgs naming an instance method (not a static one)', async () => {
    const queue = uniqueName('val');
    @Processor(queue, { autorun: false })
    @UniqueJob({ lock: 'until_executed', lockArgs: 'pick' })
    class InstanceMethodProcessor extends WorkerHost {
      pick(data: { id: string }) {
        return data.id;
      }
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [queue], providers: [InstanceMethodProcessor] });
    expect(error.option).toBe('lockArgs');
    expect(error.message).toContain('"pick"');
    expect(error.message).toContain('not a static method');
  });

  it('lockArgs of the wrong type', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('WrongTypeProcessor', queue, [loose({ lock: 'until_executed', lockArgs: ['id'] })])],
    });
    expect(error.option).toBe('lockArgs');
    expect(error.message).toContain('must be a function');
  });

  it('lockArgs as a string in a forRoot job definition', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      module: { jobs: [defineUniqueJob({ queue, lock: 'until_executed', lockArgs: 'lockArgs' })] },
    });
    expect(error.source).toBe(`forRoot jobs[0] (queue "${queue}")`);
    expect(error.option).toBe('lockArgs');
    expect(error.message).toContain('"lockArgs"');
    expect(error.message).toContain('use a function');
  });

  it('an unknown option key (a typo like lock_ttl)', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('TypoProcessor', queue, [loose({ lock: 'until_expired', lock_ttl: 1000 })])],
    });
    expect(error.source).toContain('TypoProcessor');
    expect(error.option).toBe('lock_ttl');
    expect(error.message).toContain('"lock_ttl" is not an option');
    for (const key of ['lock', 'lockTtl', 'lockArgs', 'onConflict', 'uniqueAcross', 'jobName']) {
      expect(error.message).toContain(key);
    }
  });

  it('an unknown option key in a forRoot job definition', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      module: {
        jobs: [defineUniqueJob(loose({ queue, lock: 'until_executed', lockargs: () => 1 }) as UniqueJobDefinition)],
      },
    });
    expect(error.source).toContain('forRoot jobs[0]');
    expect(error.option).toBe('lockargs');
    expect(error.message).toContain('queue');
  });

  it.each([
    ['an unknown value', 'everything'],
    ['a list with an unknown value', ['queues', 'jobs']],
  ])('uniqueAcross with %s', async (_label, uniqueAcross) => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('AcrossProcessor', queue, [loose({ lock: 'until_executed', uniqueAcross })])],
    });
    expect(error.source).toContain('AcrossProcessor');
    expect(error.option).toBe('uniqueAcross');
    expect(error.message).toContain('queues, names');
  });

  it('a definition whose queue differs from the processor queue', async () => {
    const queue = uniqueName('val');
    const other = uniqueName('other');
    const definition = defineUniqueJob({ queue: other, lock: 'until_executed' });
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('WrongQueueProcessor', queue, [definition])],
    });
    expect(error.source).toContain('WrongQueueProcessor');
    expect(error.option).toBe('queue');
    expect(error.message).toContain(other);
    expect(error.message).toContain(queue);
  });

  it('two @UniqueJob with overlapping job names', async () => {
    const queue = uniqueName('val');
    @Processor(queue, { autorun: false })
    @UniqueJob({ lock: 'until_executed', jobName: ['charge', 'refund'] })
    @UniqueJob({ lock: 'while_executing', jobName: ['refund', 'payout'] })
    class OverlapProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [queue], providers: [OverlapProcessor] });
    expect(error.source).toBe('OverlapProcessor (@UniqueJob #2)');
    expect(error.option).toBe('jobName');
    expect(error.message).toContain('job "refund"');
    expect(error.message).toContain('OverlapProcessor (@UniqueJob #1)');
  });

  it('two @UniqueJob without job names (both for every name)', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('TwiceProcessor', queue, [{ lock: 'until_executed' }, { lock: 'until_executing' }])],
    });
    expect(error.option).toBe('jobName');
    expect(error.message).toContain('every job name');
  });

  it('a forRoot definition and a different @UniqueJob for the same job name', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      module: { jobs: [defineUniqueJob({ queue, lock: 'until_executed', jobName: 'charge' })] },
      providers: [
        processor('DivergedProcessor', queue, [defineUniqueJob({ queue, lock: 'until_executed', jobName: 'charge' })]),
      ],
    });
    expect(error.source).toContain('DivergedProcessor');
    expect(error.option).toBe('jobName');
    expect(error.message).toContain('forRoot jobs[0]');
  });

  it('an empty jobName list', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      providers: [processor('EmptyNamesProcessor', queue, [{ lock: 'until_executed', jobName: [] }])],
    });
    expect(error.option).toBe('jobName');
  });

  it('a @UniqueJob class without @Processor', async () => {
    const queue = uniqueName('val');
    @Injectable()
    @UniqueJob({ lock: 'until_executed' })
    class NotAProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({ queues: [queue], providers: [NotAProcessor] });
    expect(error.source).toBe('NotAProcessor');
    expect(error.option).toBe('@UniqueJob');
    expect(error.message).toContain('@Processor');
  });

  it.each(['app{1}', 'a{b', 'has space', ''])('a module prefix %j', async (prefix) => {
    const queue = uniqueName('val');
    const error = await invalidOptions({ queues: [queue], module: { prefix } });
    expect(error.source).toBe('UniqueJobsModule.forRoot');
    expect(error.option).toBe('prefix');
    expect(error.message).toContain('no braces');
  });

  it.each<[string, UniqueJobOptions, string]>([
    ['lockTtl on while_executing', { lock: 'while_executing', lockTtl: 10_000 }, 'lockTtl'],
    ['lockTimeout on until_executed', { lock: 'until_executed', lockTimeout: 5_000 }, 'lockTimeout'],
    [
      'runtimeLockLease on until_expired',
      { lock: 'until_expired', lockTtl: 1_000, runtimeLockLease: 5_000 },
      'runtimeLockLease',
    ],
    ['rescheduleIn on until_executing', { lock: 'until_executing', rescheduleIn: 100 }, 'rescheduleIn'],
    ['rescheduleIn beside raise', { lock: 'while_executing', onConflict: 'raise', rescheduleIn: 100 }, 'rescheduleIn'],
    ['maxReschedules beside log (the default)', { lock: 'while_executing', maxReschedules: 3 }, 'maxReschedules'],
    [
      'rescheduleIn beside a worker-side reject',
      { lock: 'until_and_while_executing', onConflict: { server: 'reject' }, rescheduleIn: 100 },
      'rescheduleIn',
    ],
  ])('an option the lock never uses: %s', async (_label, options, option) => {
    const queue = uniqueName('val');
    const error = await invalidOptions({ queues: [queue], providers: [processor('UselessOption', queue, [options])] });
    expect(error.option).toBe(option);
    expect(error.message).toContain('has no effect');
  });

  it('a custom strategy that lacks the method for a side it claims', async () => {
    const queue = uniqueName('val');
    const broken = {
      name: 'half',
      sides: ['client', 'server'],
      onServerConflict: async () => undefined,
    } as unknown as ConflictStrategy;
    const error = await invalidOptions({
      queues: [queue],
      module: { strategies: [broken] },
      providers: [processor('HalfStrategy', queue, [{ lock: 'until_executed', onConflict: 'half' }])],
    });
    expect(error.source).toBe('UniqueJobsModule.forRoot');
    expect(error.option).toBe('strategies (half)');
    expect(error.message).toContain('onClientConflict');
  });

  it('an unknown key in the module defaults (a typo)', async () => {
    const queue = uniqueName('val');
    const error = await invalidOptions({
      queues: [queue],
      module: { defaults: { lock_ttl: 1000 } as unknown as UniqueJobsModuleOptions['defaults'] },
    });
    expect(error.source).toBe('UniqueJobsModule.forRoot');
    expect(error.option).toBe('defaults.lock_ttl');
    expect(error.message).toContain('lockTtl');
  });

  it('a connection with an ioredis keyPrefix (options or a client)', async () => {
    const client = redisClient({ keyPrefix: 'mine:', lazyConnect: true });
    for (const connection of [{ ...redisOptions(), keyPrefix: 'mine:' }, client]) {
      const error = await invalidOptions({ queues: [uniqueName('val')], module: { connection } });
      expect(error.source).toBe('UniqueJobsModule');
      expect(error.option).toBe('connection');
      expect(error.message).toContain('keyPrefix');
      expect(error.message).toContain('"prefix"');
    }
    client.disconnect();
  });

  it('a processor of a queue with forRoot job definitions but no @UniqueJob', async () => {
    const queue = uniqueName('val');
    @Processor(queue, { autorun: false })
    class UnguardedProcessor extends WorkerHost {
      async process(): Promise<void> {}
    }
    const error = await invalidOptions({
      queues: [queue],
      module: { jobs: [defineUniqueJob({ queue, lock: 'until_executed', lockArgs: (d: { id: string }) => d.id })] },
      providers: [UnguardedProcessor],
    });
    expect(error.source).toBe('UnguardedProcessor');
    expect(error.option).toBe('@UniqueJob');
    expect(error.message).toContain(queue);
    expect(error.message).toContain('is missing');
  });

  // Found by a hostile review (session 28): a queue consumed by registerQueue's `processors` (callbacks or sandboxed
  // files) booted silently, and its jobs ran without run-time locks (while_executing duplicates overlapped).
  describe('a queue with unique job definitions consumed by BullModule.registerQueue processors', () => {
    const consumed = (name: string) => ({ name, processors: [{ callback: async () => undefined, autorun: false }] });

    it('definitions in forRoot jobs', async () => {
      const queue = uniqueName('val');
      const error = await invalidOptions({
        queues: [consumed(queue)],
        module: { jobs: [defineUniqueJob({ queue, lock: 'while_executing', lockArgs: (d: { id: string }) => d.id })] },
      });
      expect(error.source).toBe(`BullModule.registerQueue({ name: "${queue}" })`);
      expect(error.option).toBe('processors');
      expect(error.message).toContain(`@Processor("${queue}")`);
    });

    it('definitions on a @Processor class of the queue, and an @IdempotencyKey alone', async () => {
      const [guardedQueue, keyedQueue] = [uniqueName('val'), uniqueName('val')];
      @Processor(keyedQueue, { autorun: false })
      @IdempotencyKey({ key: (job: IdempotencyJob<{ id: string }>) => job.data.id })
      class KeyedProcessor extends WorkerHost {
        async process(): Promise<void> {}
      }
      for (const [queue, decorated] of [
        [guardedQueue, processor('GuardedProcessor', guardedQueue, [{ lock: 'while_executing' }])],
        [keyedQueue, KeyedProcessor],
      ] as const) {
        const error = await invalidOptions({ queues: [consumed(queue)], providers: [decorated] });
        expect(error.option).toBe('processors');
      }
    });

    it('registered twice (a worker module and a producer module), in either order', async () => {
      for (const order of ['processors first', 'processors last']) {
        const queue = uniqueName('val');
        const registrations = order === 'processors first' ? [consumed(queue), queue] : [queue, consumed(queue)];
        const error = await invalidOptions({
          queues: registrations,
          module: {
            jobs: [defineUniqueJob({ queue, lock: 'while_executing', lockArgs: (d: { id: string }) => d.id })],
          },
        });
        expect(error.option).toBe('processors');
      }
    });

    it('enabled: false (the library is off: jobs pass straight through) boots', async () => {
      const queue = uniqueName('val');
      const jobs = [defineUniqueJob({ queue, lock: 'while_executing', lockArgs: (d: { id: string }) => d.id })];
      expect(await bootstrapError({ queues: [consumed(queue)], module: { jobs, enabled: false } })).toBeUndefined();
    });

    it('a queue without definitions boots (control)', async () => {
      expect(await bootstrapError({ queues: [consumed(uniqueName('val'))] })).toBeUndefined();
    });
  });

  it('a valid configuration boots (control for the cases above)', async () => {
    const queue = uniqueName('val');
    const definition = defineUniqueJob({ queue, lock: 'until_executed', lockArgs: (d: { id: string }) => d.id });
    const error = await bootstrapError({
      queues: [queue],
      module: { jobs: [definition] },
      providers: [processor('SharedDefinitionProcessor', queue, [definition])],
    });
    expect(error).toBeUndefined();
  });
});

describe('lockArgs naming a static method', () => {
  const apps: TestApp[] = [];
  const redis = redisClient();
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => redis.quit());

  it('works: its digest equals the one from the equivalent function, and it locks real jobs', async () => {
    const queue = uniqueName('val');
    const calls: { data: unknown; name: string; queueName: string }[] = [];
    const byName = await startApp({
      queue,
      paused: true,
      unique: { lock: 'until_executed', lockArgs: 'uniqueBy' },
      statics: {
        uniqueBy(data: { orderId: string }, job: { name: string; queueName: string }) {
          calls.push({ data, name: job.name, queueName: job.queueName });
          return { order: data.orderId };
        },
      },
    });
    apps.push(byName);
    const byFunction = await startApp({
      queue,
      unique: { lock: 'until_executed', lockArgs: (data: { orderId: string }) => ({ order: data.orderId }) },
      module: { prefix: byName.prefix, enabled: true },
      paused: true,
    });
    apps.push(byFunction);

    const data = { orderId: 'ord_7', amount: 12 };
    const expected = digest({ queue, name: 'charge', lockArgs: { order: 'ord_7' } });
    expect(byName.service.digestOf(queue, 'charge', data)).toBe(expected);
    expect(byFunction.service.digestOf(queue, 'charge', data)).toBe(expected);
    expect(calls).toContainEqual({ data, name: 'charge', queueName: queue });

    const first = await byName.service.enqueue(byName.queue, 'charge', data);
    expect(first).toMatchObject({ status: 'enqueued', digest: expected });
    // another order id: another lock; the same order id with other data: a duplicate, from either app
    expect(await byName.service.enqueue(byName.queue, 'charge', { orderId: 'ord_8', amount: 12 })).toMatchObject({
      status: 'enqueued',
    });
    const again = await byFunction.service.enqueue(byFunction.queue, 'charge', { orderId: 'ord_7', amount: 99 });
    if (first.status !== 'enqueued') throw new Error('unexpected');
    expect(again).toMatchObject({ status: 'duplicate', digest: expected, existingJobId: first.job.id });
    expect(await byName.queue.getJobCounts('wait')).toEqual({ wait: 2 });
    expect(await lockKeys(redis, byName.prefix, queue)).toContain(`bull:${queue}:de:uj:${expected}`);
  });

  it('is called in the worker with the job, giving the digest of the equivalent function', async () => {
    const queue = uniqueName('val');
    const seen: Job[] = [];
    const app = await startApp({
      queue,
      unique: { lock: 'while_executing', lockArgs: 'key' },
      statics: { key: (data: { k: string }) => data.k },
      handler: async (job) => {
        seen.push(job);
        return 'ok';
      },
    });
    apps.push(app);
    const job = await app.queue.add('run', { k: 'alpha' });
    await expect(app.finished(job)).resolves.toBe('ok');
    expect(seen).toHaveLength(1);
    // A run-time-only lock stores nothing on the job: the worker computes the digest from the stored data.
    expect(seen[0].opts).not.toHaveProperty('uniqueJobs');
    expect(app.service.digestOf(queue, 'run', seen[0].data)).toBe(digest({ queue, name: 'run', lockArgs: 'alpha' }));
  });
});
