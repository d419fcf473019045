// What the listener tests share: a user's worker event listener, added before the library's own or after it.
import type { Job, QueueEvents, Worker } from 'bullmq';
import type { UniqueJobOptions } from '../../lib/index.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { deferred, type Deferred } from '../support/deferred.js';
import { Gates } from '../support/gates.js';
import { byId, enqueuedJob } from '../support/locks.js';

export type Order = 'before' | 'after';
export const ORDERS: Order[] = ['before', 'after'];

/** The enqueue-lock paths: BullMQ's deduplication key (with and without TTL), and the library's slot set. */
export const PATHS: [string, Partial<UniqueJobOptions>][] = [
  ['fast path', {}],
  ['fast path with lockTtl', { lockTtl: 60_000 }],
  ['slot set (uniqueAcross queues)', { uniqueAcross: 'queues' }],
];

/** Adds `listener` to a worker event before the library's listener, or after it. */
export function listen(
  worker: Worker,
  event: 'failed' | 'completed',
  order: Order,
  listener: (job?: Job) => void,
): void {
  const untyped = worker as unknown as {
    on(event: string, l: (job?: Job) => void): void;
    prependListener(event: string, l: (job?: Job) => void): void;
  };
  if (order === 'before') untyped.prependListener(event, listener);
  else untyped.on(event, listener);
}

/** Calls `job.retry()` synchronously from the first `failed` event of a job failed for good; resolves the job. */
export function retryOnFinalFailure(worker: Worker, order: Order): Deferred<Job> {
  const retried = deferred<Job>();
  let done = false;
  listen(worker, 'failed', order, (job) => {
    if (!job?.finishedOn || done) return;
    done = true;
    job.retry('failed').then(() => retried.resolve(job), retried.reject);
  });
  return retried;
}

/** Adds a job of the same digest (`tag: 'again'`) from the first `failed` event of a job failed for good. */
export function addOnFinalFailure(a: TestApp, order: Order): Deferred<Job> {
  const added = deferred<Job>();
  let done = false;
  listen(a.worker!, 'failed', order, (job) => {
    if (!job?.finishedOn || done) return;
    done = true;
    a.queue.add('sync', { id: 'u1', tag: 'again' }).then(added.resolve, added.reject);
  });
  return added;
}

/** Resolves when QueueEvents reports `jobId` completed (subscribe before the transition). */
export function completedEvent(events: QueueEvents, jobId: string): Promise<void> {
  return new Promise((resolve) => {
    const listener = ({ jobId: id }: { jobId: string }) => {
      if (id !== jobId) return;
      events.off('completed', listener);
      resolve();
    };
    events.on('completed', listener);
  });
}

/**
 * An `until_and_while_executing` app (`unique` adds to or overrides its options: `onConflict`, `lockTimeout` 0, the
 * path) whose job A of digest u1 is running, held by `gates` ('a').
 */
export async function holderRunning(
  start: (options: Partial<TestAppOptions>) => Promise<TestApp>,
  unique: Partial<UniqueJobOptions>,
) {
  const gates = new Gates().hold('a');
  const a = await start({
    unique: { lock: 'until_and_while_executing', lockArgs: byId, lockTimeout: 0, ...unique },
    handler: gates.handler,
    worker: { concurrency: 2 },
  });
  const first = enqueuedJob(await a.service.enqueue(a.queue, 'sync', { id: 'u1', tag: 'a' }));
  await gates.started('a');
  return { a, gates, first };
}
