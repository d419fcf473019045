// Helpers of the lifecycle regression files (lifecycle-*.spec.ts).
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { UniqueJobEvent } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import type { EventLog } from '../support/events.js';
import { dedupHolder, digestOf, owners, queuedKey } from '../support/locks.js';

/** What a promise did: resolved (the value) or rejected (the error). */
export async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return error;
  }
}

/** The library's `unlocked` event of a job's enqueue lock. */
export const enqueueUnlocked =
  (jobId: string | undefined) =>
  (event: UniqueJobEvent): boolean =>
    event.type === 'unlocked' && event.lock === 'enqueue' && event.jobId === jobId;

/**
 * The first event matching `predicate`, or `undefined` when none came within `ms`. For a release that must follow a
 * transition: on the fixed code the event comes within milliseconds, and the assertions that follow say what is wrong
 * when it does not (instead of the test hitting jest's timeout).
 */
export async function eventWithin(
  events: EventLog,
  predicate: (event: UniqueJobEvent) => boolean,
  ms: number,
): Promise<UniqueJobEvent | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([events.next(predicate), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The holders of a digest's enqueue lock of job name `sync`: the value of BullMQ's deduplication key on the fast path,
 * the owners of the library's `…:queued` key on the general path.
 */
export async function enqueueHolders(
  redis: Redis,
  app: TestApp,
  path: 'fast' | 'general',
  data: unknown,
): Promise<string[]> {
  const value = digestOf(app, 'sync', data);
  if (path === 'general') return owners(redis, queuedKey(app.prefix, value));
  const holder = await dedupHolder(redis, app.queue.name, value);
  return holder === null ? [] : [holder];
}

/** The jobs of a queue that are still to run (waiting, delayed, prioritized or active). */
export function pendingJobs(app: TestApp): Promise<Job[]> {
  return app.queue.getJobs(['waiting', 'delayed', 'prioritized', 'active']);
}
