import { WorkerHost } from '@nestjs/bullmq';
import { DiscoveryService } from '@nestjs/core';
import type { Worker } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import type { Gates } from '../support/gates.js';
import { byId } from '../support/locks.js';

/** The BullMQ worker of the app's processor (found through Nest's discovery, no private fields). */
export function workerOf(app: TestApp): Worker {
  const discovery = app.moduleRef.get(DiscoveryService, { strict: false });
  const host = discovery
    .getProviders()
    .map((wrapper) => wrapper.instance as unknown)
    .find((instance): instance is WorkerHost => instance instanceof WorkerHost);
  if (!host) throw new Error('the app has no processor');
  return host.worker;
}

/** The data of the jobs the handler ran, in order. */
export function runData<T>(app: TestApp): T[] {
  return app.runs.map((job) => job.data as T);
}

/** Options of an app whose conflicts happen at enqueue: until_executed on `data.id`, the worker paused. */
export function clientSide(
  onConflict: UniqueJobOptions['onConflict'],
  unique: Partial<UniqueJobOptions> = {},
): Partial<TestAppOptions> {
  return { unique: { lock: 'until_executed', onConflict, lockArgs: byId, ...unique }, paused: true };
}

/** Options of an app whose conflicts happen in the worker: while_executing on `data.id`, runs held by `gates`. */
export function serverSide(
  onConflict: UniqueJobOptions['onConflict'],
  gates: Gates,
  unique: Partial<UniqueJobOptions> = {},
): Partial<TestAppOptions> {
  return {
    unique: { lock: 'while_executing', onConflict, lockArgs: byId, ...unique },
    handler: gates.handler,
    worker: { concurrency: 2 },
  };
}
