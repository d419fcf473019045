import 'reflect-metadata';
import { expect } from '@jest/globals';
import type { Provider } from '@nestjs/common';
import { BullModule, type RegisterQueueOptions } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { InvalidUniqueJobOptionsError, UniqueJobsModule, type UniqueJobsModuleOptions } from '../../lib/index.js';
import { deleteNamespaces, redisClient, uniqueName } from './redis.js';

export interface BootOptions {
  /** The queues registered with `BullModule.registerQueue`: names, or registration options. */
  queues: (string | RegisterQueueOptions)[];
  providers?: Provider[];
  /** Module options; a function gets the test's Redis client (to build stores on it). */
  module?: Partial<UniqueJobsModuleOptions> | ((client: Redis) => Partial<UniqueJobsModuleOptions>);
  /** The client BullMQ and the library share (default: the run's, `redisClient()`); disconnected at the end. */
  connection?: Redis;
}

/**
 * Bootstraps a Nest application (compile + init) with BullMQ, the queues, the unique-jobs module and the providers,
 * closes it, and resolves the bootstrap error (or `undefined`). BullMQ, the library and any store share one client the
 * test owns, so a bootstrap that fails half-way leaves no connection open.
 */
export async function bootstrapError(options: BootOptions): Promise<unknown> {
  const connection = options.connection ?? redisClient();
  let moduleRef: TestingModule | undefined;
  const prefix = uniqueName('ujv');
  try {
    const module = typeof options.module === 'function' ? options.module(connection) : options.module;
    moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection }),
        ...options.queues.map((queue) => BullModule.registerQueue(typeof queue === 'string' ? { name: queue } : queue)),
        UniqueJobsModule.forRoot({ logger: false, prefix, ...module }),
      ],
      providers: options.providers ?? [],
    })
      .setLogger({ log: () => undefined, error: () => undefined, warn: () => undefined })
      .compile();
    await moduleRef.init();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await moduleRef?.close().catch(() => undefined);
    connection.disconnect();
    // What the half-booted app wrote (BullMQ's queue meta, a worker's keys) goes with it: the shared Redis stays clean.
    // On a client of its own: the app's may be closed by now, and nothing of the app writes once it is.
    const cleaner = redisClient();
    const queues = options.queues.map((queue) => (typeof queue === 'string' ? queue : queue.name!));
    await deleteNamespaces(cleaner, { queues, prefixes: [prefix] });
    cleaner.disconnect();
  }
}

/** The bootstrap error, asserted to be an InvalidUniqueJobOptionsError. */
export async function invalidOptions(options: BootOptions): Promise<InvalidUniqueJobOptionsError> {
  const error = await bootstrapError(options);
  expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
  return error as InvalidUniqueJobOptionsError;
}
