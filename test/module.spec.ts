import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import {
  BullModule,
  getQueueToken,
  InjectQueue,
  Processor,
  QueueEventsHost,
  QueueEventsListener,
  WorkerHost,
} from '@nestjs/bullmq';
import { Injectable, Module, Scope, type OnModuleInit } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { defineUniqueJob, IdempotencyKey, UniqueJob, UniqueJobsModule, UniqueJobsService } from '../lib/index.js';
import { processorClass } from './support/app.js';
import { deferred } from './support/deferred.js';
import {
  deleteNamespaces,
  openQueueEvents,
  prefixKeys,
  redisClient,
  redisOptions,
  scanKeys,
  uniqueName,
} from './support/redis.js';

describe('UniqueJobsModule wiring', () => {
  const redis = redisClient();
  // The queues and prefixes the tests make: their keys are deleted after the file (the shared Redis stays clean).
  const queues: string[] = [];
  const prefixes: string[] = [];
  const newQueueName = (label: string) => {
    const name = uniqueName(label);
    queues.push(name);
    return name;
  };
  const newPrefix = (label: string) => {
    const name = uniqueName(label);
    prefixes.push(name);
    return name;
  };
  afterAll(async () => {
    await deleteNamespaces(redis, { queues, prefixes });
    await redis.quit();
  });

  it('closes an application whose @QueueEventsListener was never registered (manualRegistration): the shutdown skips it', async () => {
    const queueName = newQueueName('manual');
    @QueueEventsListener(queueName)
    class Listener extends QueueEventsHost {}
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions(), extraOptions: { manualRegistration: true } }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, prefix: newPrefix('ujmanual') }),
      ],
      providers: [Listener],
    }).compile();
    await moduleRef.init();
    expect(() => moduleRef.get(Listener).queueEvents).toThrow(/not yet been initialized/);
    await expect(moduleRef.close()).resolves.toBeUndefined();
  });

  it('forRootAsync builds the options from a factory with injected dependencies', async () => {
    const queueName = newQueueName('async');
    const prefix = newPrefix('ujasync');
    const CONFIG = Symbol('CONFIG');
    @Module({ providers: [{ provide: CONFIG, useValue: { prefix } }], exports: [CONFIG] })
    class ConfigModule {}
    const definition = defineUniqueJob({ queue: queueName, lock: 'until_executed', lockLimit: 2 });
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRootAsync({
          imports: [ConfigModule],
          inject: [CONFIG],
          useFactory: (config: { prefix: string }) => ({ prefix: config.prefix, jobs: [definition], logger: false }),
        }),
      ],
    }).compile();
    await moduleRef.init();
    try {
      const queue = moduleRef.get<Queue>(getQueueToken(queueName));
      const service = moduleRef.get(UniqueJobsService);
      const results = await Promise.all([1, 2, 3].map(() => service.enqueue(queue, 'x', { same: true })));
      expect(results.map((r) => r.status).sort()).toEqual(['duplicate', 'enqueued', 'enqueued']);
      // lockLimit 2 uses the library's own key, under the configured prefix: the options reached the module.
      expect(await prefixKeys(redis, prefix)).toHaveLength(1);
    } finally {
      await moduleRef.close();
    }
  });

  it('guards queue.add in a user module onModuleInit, and guards a queue created by hand', async () => {
    const queueName = newQueueName('hooks');
    const enqueued = deferred<Job[]>();
    @Injectable()
    class Producer implements OnModuleInit {
      constructor(@InjectQueue(queueName) private readonly queue: Queue) {}
      async onModuleInit() {
        enqueued.resolve([await this.queue.add('x', { id: 1 }), await this.queue.add('x', { id: 1 })]);
      }
    }
    @Module({ imports: [BullModule.registerQueue({ name: queueName })], providers: [Producer] })
    class FeatureModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        FeatureModule,
        UniqueJobsModule.forRoot({
          logger: false,
          prefix: newPrefix('ujhooks'),
          jobs: [defineUniqueJob({ queue: queueName, lock: 'until_executed' })],
        }),
      ],
    }).compile();
    await moduleRef.init();
    const manual = new Queue(queueName, { connection: redisOptions() });
    try {
      const [first, second] = await enqueued.promise;
      expect(second.id).toBe(first.id);
      const service = moduleRef.get(UniqueJobsService);
      service.guardQueue(manual);
      const third = await manual.add('x', { id: 1 });
      expect(third.id).toBe(first.id);
      expect(await manual.getJobCounts('waiting')).toEqual({ waiting: 1 });
    } finally {
      await manual.close();
      await moduleRef.close();
    }
  });

  it('fails the bootstrap of a decorated processor without UniqueJobsModule, naming the module to import', async () => {
    const queueName = newQueueName('nomodule');
    const Processor = processorClass({ queue: queueName, unique: { lock: 'until_executed' }, paused: true }, []);
    // No BullModule.registerQueue (a processor needs none: its worker is made at init): the queue would open its Redis
    // connection during compile(), and a compile() that fails hands back no module to close it with (the open socket
    // kept the jest worker alive after the run).
    const compiled = Test.createTestingModule({
      imports: [BullModule.forRoot({ connection: redisOptions() })],
      providers: [Processor],
    }).compile();
    await expect(compiled).rejects.toThrow(/UniqueJobsModule\.forRoot\(\) or forRootAsync\(\), imported once/);
  });

  it.each(['@UniqueJob', '@IdempotencyKey'] as const)(
    'fails the bootstrap of a Scope.TRANSIENT processor with %s (@nestjs/bullmq would run it unguarded)',
    async (decorator) => {
      const queueName = newQueueName('transient');
      @Processor({ name: queueName, scope: Scope.TRANSIENT })
      class TransientProcessor extends WorkerHost {
        process(job: Job) {
          return Promise.resolve(job.id);
        }
      }
      if (decorator === '@UniqueJob') UniqueJob({ lock: 'while_executing' })(TransientProcessor);
      else IdempotencyKey((job: Job<{ id: string }>) => job.data.id)(TransientProcessor);
      const moduleRef = await Test.createTestingModule({
        imports: [
          BullModule.forRoot({ connection: redisOptions() }),
          BullModule.registerQueue({ name: queueName }),
          UniqueJobsModule.forRoot({ logger: false, prefix: newPrefix('ujtransient') }),
        ],
        providers: [TransientProcessor],
      }).compile();
      await expect(moduleRef.init()).rejects.toThrow(
        `Invalid unique job options in TransientProcessor: "${decorator}" is not supported on a Scope.TRANSIENT processor`,
      );
      await moduleRef.close();
    },
  );

  it('fails the bootstrap of a bare `imports: [UniqueJobsModule]` (no options), alone or in a feature module beside forRoot, naming forRoot', async () => {
    const message =
      'Invalid unique job options in the application: "UniqueJobsModule" is imported without options (the bare class): import UniqueJobsModule.forRoot({ … }) or forRootAsync({ … }) once, in the root module';
    await expect(Test.createTestingModule({ imports: [UniqueJobsModule] }).compile()).rejects.toThrow(message);
    @Module({ imports: [UniqueJobsModule] })
    class FeatureModule {}
    const beside = Test.createTestingModule({
      imports: [UniqueJobsModule.forRoot({ logger: false, prefix: newPrefix('ujbare') }), FeatureModule],
    }).compile();
    await expect(beside).rejects.toThrow(message);
  });

  it('fails the bootstrap when forRoot is imported twice (one would guard nothing)', async () => {
    const [a, b] = [newQueueName('twice-a'), newQueueName('twice-b')];
    const prefix = newPrefix('ujtwice');
    @Module({
      imports: [
        BullModule.registerQueue({ name: a }),
        UniqueJobsModule.forRoot({
          logger: false,
          prefix,
          jobs: [defineUniqueJob({ queue: a, lock: 'until_executed' })],
        }),
      ],
    })
    class ModuleA {}
    @Module({
      imports: [
        BullModule.registerQueue({ name: b }),
        UniqueJobsModule.forRoot({
          logger: false,
          prefix,
          jobs: [defineUniqueJob({ queue: b, lock: 'until_executed' })],
        }),
      ],
    })
    class ModuleB {}
    const moduleRef = await Test.createTestingModule({
      imports: [BullModule.forRoot({ connection: redisOptions() }), ModuleA, ModuleB],
    }).compile();
    await expect(moduleRef.init()).rejects.toThrow(
      'Invalid unique job options in the application: "UniqueJobsModule.forRoot" is imported 2 times (each import is an instance of its own): import it once, in the root module',
    );
    await moduleRef.close();
  });

  it('fails the bootstrap when the library would use another Redis database than its queues (the reaper would free live locks), with the default connection or one given to forRoot; names a keyPrefix apart', async () => {
    const queueName = newQueueName('apart');
    const prefix = newPrefix('ujapart');
    const errors: string[] = [];
    const logger = {
      log: () => undefined,
      warn: () => undefined,
      error: (message: string) => void errors.push(message),
    };
    const bootstrap = async (queueDb: number, connection?: { db: number }, keyPrefix?: string) => {
      const moduleRef = await Test.createTestingModule({
        imports: [
          BullModule.forRoot({ connection: redisOptions() }),
          BullModule.registerQueue({
            name: queueName,
            connection: { ...redisOptions(), db: queueDb, ...(keyPrefix ? { keyPrefix } : {}) },
          }),
          UniqueJobsModule.forRoot({
            logger,
            prefix,
            ...(connection ? { connection: { ...redisOptions(), ...connection } } : {}),
            jobs: [defineUniqueJob({ queue: queueName, lock: 'until_executed' })],
          }),
        ],
      }).compile();
      try {
        await moduleRef.init();
      } finally {
        await moduleRef.close();
      }
    };
    // What BullMQ writes for the queue on database 1 (its `meta`), and the library there, is deleted at the end.
    const db1 = new Redis({ ...redisOptions(), db: 1 });
    try {
      // The default connection (BullModule.forRoot's, database 0) against a queue with its own, on database 1.
      await expect(bootstrap(1)).rejects.toThrow(
        `"connection" reaches another Redis database than queue "${queueName}" lives on: the library's locks, dead set and reaper must use the queues' Redis (its reaper would free locks of live jobs); give forRoot the queues' connection (it uses BullModule.forRoot's default configuration`,
      );
      await expect(bootstrap(0)).resolves.toBeUndefined();
      // A connection given to forRoot fails the same way.
      await expect(bootstrap(1, { db: 0 })).rejects.toThrow(
        `"connection" reaches another Redis database than queue "${queueName}" lives on: the library's locks, dead set and reaper must use the queues' Redis (its reaper would free locks of live jobs); give forRoot the queues' connection`,
      );
      await expect(bootstrap(0, { db: 1 })).rejects.toThrow(`another Redis database than queue "${queueName}"`);
      await expect(bootstrap(0, { db: 0 })).resolves.toBeUndefined();
      // The same server and database, keys named apart: the keyPrefix is named, not "another server".
      await expect(bootstrap(0, undefined, 'kp:')).rejects.toThrow(
        `"connection" names keys with another ioredis keyPrefix than queue "${queueName}" (same server and database)`,
      );
      expect(errors).toEqual([]);
    } finally {
      const keys = [...(await scanKeys(db1, `bull:${queueName}:*`)), ...(await scanKeys(db1, `${prefix}:*`))];
      if (keys.length > 0) await db1.del(...keys);
      await db1.quit();
      // What BullMQ wrote for the queue whose connection names keys with a keyPrefix.
      const db0 = new Redis(redisOptions());
      const prefixed = await scanKeys(db0, `kp:bull:${queueName}:*`);
      if (prefixed.length > 0) await db0.del(...prefixed);
      await db0.quit();
    }
  });

  it('checks a queue passed to guardQueue from a factory with the registered ones (the bootstrap fails), and the database an ioredis instance SELECTed', async () => {
    const prefix = newPrefix('ujfactory');
    const apartName = newQueueName('factory');
    const db1 = new Redis({ ...redisOptions(), db: 1 });
    const bootstrap = async (queueDb: number, library?: Redis) => {
      const moduleRef = await Test.createTestingModule({
        imports: [
          BullModule.forRoot({ connection: redisOptions() }),
          UniqueJobsModule.forRoot({ logger: false, prefix, ...(library ? { connection: library } : {}) }),
        ],
        providers: [
          {
            provide: 'MANUAL_QUEUE',
            inject: [UniqueJobsService],
            // A holder of the queue, not the queue itself (which the guard would find among the providers).
            useFactory: (service: UniqueJobsService) => ({
              queue: service.guardQueue(new Queue(apartName, { connection: { ...redisOptions(), db: queueDb } })),
            }),
          },
        ],
      }).compile();
      const { queue } = moduleRef.get<{ queue: Queue }>('MANUAL_QUEUE');
      try {
        await moduleRef.init();
      } finally {
        await queue.close();
        await moduleRef.close();
      }
    };
    // An ioredis instance of the caller's, moved to database 1 by a SELECT after it connected (its options say 0).
    const selected = new Redis(redisOptions());
    try {
      await expect(bootstrap(1)).rejects.toThrow(
        `"connection" reaches another Redis database than queue "${apartName}"`,
      );
      await selected.select(1);
      await expect(bootstrap(1, selected)).resolves.toBeUndefined();
      await expect(bootstrap(0, selected)).rejects.toThrow(`another Redis database than queue "${apartName}"`);
    } finally {
      await selected.quit();
      const keys = [...(await scanKeys(db1, `bull:${apartName}:*`)), ...(await scanKeys(db1, `${prefix}:*`))];
      if (keys.length > 0) await db1.del(...keys);
      await db1.quit();
    }
  });

  it('logs an error at the first add of a queue passed to guardQueue after the bootstrap that lives in another Redis database (and none for one beside the library)', async () => {
    const prefix = newPrefix('ujlate');
    const logged = deferred<string>();
    const errors: string[] = [];
    const logger = {
      log: () => undefined,
      warn: () => undefined,
      error: (message: string) => {
        errors.push(message);
        logged.resolve(message);
      },
    };
    const moduleRef = await Test.createTestingModule({
      imports: [BullModule.forRoot({ connection: redisOptions() }), UniqueJobsModule.forRoot({ logger, prefix })],
    }).compile();
    await moduleRef.init();
    const [besideName, apartName] = [newQueueName('beside'), newQueueName('apart')];
    const beside = new Queue(besideName, { connection: redisOptions() });
    const apart = new Queue(apartName, { connection: { ...redisOptions(), db: 3 } });
    const db3 = new Redis({ ...redisOptions(), db: 3 });
    try {
      const service = moduleRef.get(UniqueJobsService);
      service.guardQueue(beside);
      await beside.add('x', { id: 1 }); // checked at its first add
      service.guardQueue(apart);
      expect(errors).toEqual([]);
      await apart.add('x', { id: 1 }); // the add goes on, the error is logged
      await expect(logged.promise).resolves.toContain(
        `"connection" reaches another Redis database than queue "${apartName}" lives on`,
      );
      expect(errors).toHaveLength(1);
    } finally {
      await Promise.all([beside.close(), apart.close()]);
      await moduleRef.close();
      const keys = await scanKeys(db3, `bull:${apartName}:*`);
      if (keys.length > 0) await db3.del(...keys);
      await db3.quit();
    }
  });

  it('warns at bootstrap of a queue of forRoot definitions not registered with BullModule.registerQueue (processors are not producers: no warning)', async () => {
    const [registered, unregistered] = [newQueueName('reg'), newQueueName('unreg')];
    const warnings: string[] = [];
    const logger = {
      log: () => undefined,
      error: () => undefined,
      warn: (message: unknown) => void warnings.push(String(message)),
    };
    const Processor = processorClass({ queue: registered, unique: { lock: 'until_executed' }, paused: true }, []);
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: registered }),
        UniqueJobsModule.forRoot({
          logger,
          prefix: newPrefix('ujunreg'),
          jobs: [defineUniqueJob({ queue: unregistered, lock: 'until_executed' })],
        }),
      ],
      providers: [Processor],
    }).compile();
    await moduleRef.init();
    expect(warnings).toEqual([
      `Queue "${unregistered}" has forRoot job definitions but is not registered with BullModule.registerQueue in this application: only a registered queue, or one passed to UniqueJobsService.guardQueue(queue), is guarded (a new Queue("${unregistered}") of your own adds unguarded)`,
    ]);
    await moduleRef.close();
  });

  it('guards the processor before its worker fetches the first job (a job already waiting at boot)', async () => {
    const queueName = newQueueName('boot');
    const prefix = newPrefix('ujboot');
    const plain = new Queue(queueName, { connection: redisOptions() });
    await plain.add('x', { account: 'a' }); // added without the library: the worker computes the digest
    const started = deferred();
    const gate = deferred();
    const runs: Job[] = [];
    const Processor = processorClass(
      {
        queue: queueName,
        unique: { lock: 'while_executing' },
        handler: async () => {
          started.resolve();
          await gate.promise;
        },
      },
      runs,
    );
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, prefix }),
      ],
      providers: [Processor],
    }).compile();
    await moduleRef.init();
    const events = await openQueueEvents(queueName);
    try {
      await started.promise;
      expect(await scanKeys(redis, `${prefix}:*:running`)).toHaveLength(1);
      gate.resolve();
      await events.waitUntilReady();
      await runs[0].waitUntilFinished(events).catch(() => undefined);
      expect(runs).toHaveLength(1);
    } finally {
      gate.resolve();
      await events.close();
      await plain.close();
      await moduleRef.close();
    }
  });

  it('uses a Redis client passed in the options and leaves it open at shutdown', async () => {
    const queueName = newQueueName('client');
    const client = new Redis(redisOptions());
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, connection: client, prefix: newPrefix('ujclient') }),
      ],
    }).compile();
    await moduleRef.init();
    await moduleRef.close();
    expect(await client.ping()).toBe('PONG');
    await client.quit();
  });
});
