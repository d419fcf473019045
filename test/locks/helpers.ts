import { randomUUID } from 'node:crypto';
import { Worker, type Job, type QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { EnqueueResult, UniqueJobEvent } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { deferred, type Deferred } from '../support/deferred.js';
import { redisOptions } from '../support/redis.js';

/** The data of the jobs in these tests: `id` is the lock argument. */
export type TestJob = Job<{ id: string; n?: number; fail?: boolean }>;

/** Polls `probe` until it returns a truthy value (bounded): for time-based transitions only (TTL, lease, delay). */
export async function waitFor<T>(probe: () => Promise<T> | T, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Resolves when QueueEvents reports `event` for `jobId`. Subscribe before triggering the transition. */
export function queueEvent(
  queueEvents: QueueEvents,
  event: 'delayed' | 'stalled' | 'active' | 'waiting',
  jobId: string,
): Promise<void> {
  return new Promise((resolve) => {
    const listener = (args: { jobId: string }) => {
      if (args.jobId !== jobId) return;
      queueEvents.off(event, listener);
      resolve();
    };
    queueEvents.on(event, listener);
  });
}

/** Resolves with the first library event matching `match`. Subscribe before triggering it. */
export function libraryEvent(app: TestApp, match: (event: UniqueJobEvent) => boolean): Promise<UniqueJobEvent> {
  return new Promise((resolve) => {
    const subscription = app.service.events$.subscribe((event) => {
      if (!match(event)) return;
      subscription.unsubscribe();
      resolve(event);
    });
  });
}

/** Collects every library event of an app. */
export function recordEvents(app: TestApp): UniqueJobEvent[] {
  const events: UniqueJobEvent[] = [];
  app.service.events$.subscribe((event) => events.push(event));
  return events;
}

/** The job of an `enqueued` result (fails the test on a duplicate). */
export function enqueuedJob(result: EnqueueResult): Job {
  if (result.status !== 'enqueued') throw new Error(`expected an enqueued job, got ${JSON.stringify(result)}`);
  return result.job as Job;
}

/** BullMQ's deduplication key holding a fast-path enqueue lock. */
export function dedupKey(queueName: string, digest: string): string {
  return `bull:${queueName}:de:uj:${digest}`;
}

/** The library's semaphore-path enqueue lock. */
export function queuedKey(prefix: string, digest: string): string {
  return `${prefix}:{${digest}}:queued`;
}

/** The library's run-time lock. */
export function runningKey(prefix: string, digest: string): string {
  return `${prefix}:{${digest}}:running`;
}

/** The digest the app gives a job. */
export function digestOf(app: TestApp, name: string, data: unknown): string {
  const value = app.service.digestOf(app.queue.name, name, data);
  if (!value) throw new Error(`job "${name}" of queue ${app.queue.name} is not unique`);
  return value;
}

/** Owners of a sorted-set lock (run-time or semaphore path). */
export async function owners(redis: Redis, key: string): Promise<string[]> {
  return (await redis.zrange(key, '0', '-1')).sort();
}

/**
 * A crashed worker: takes the next job of the queue (the app's worker must be paused) with a 500 ms BullMQ lock that
 * nobody renews, and never finishes it. The job stalls once the lock expires.
 */
export async function takeWithCrashingWorker(queueName: string): Promise<{ job: Job; close(): Promise<void> }> {
  const worker = new Worker(queueName, null, { connection: redisOptions(), lockDuration: 500, autorun: false });
  const job = await worker.getNextJob(randomUUID());
  if (!job) {
    await worker.close(true);
    throw new Error('the crashing worker got no job');
  }
  return { job, close: () => worker.close(true) };
}

/** Records when each handler call started and ended. */
export interface Interval {
  id: string;
  key: string;
  start: number;
  end: number;
}

/** Whether any two intervals (of the same `key`) overlap in time. */
export function overlapping(intervals: readonly Interval[]): [Interval, Interval] | undefined {
  for (let i = 0; i < intervals.length; i++) {
    for (let j = i + 1; j < intervals.length; j++) {
      const a = intervals[i];
      const b = intervals[j];
      if (a.key === b.key && a.start < b.end && b.start < a.end) return [a, b];
    }
  }
  return undefined;
}

/**
 * Deferreds a test holds handlers on. `openAll` (in afterEach) lets every held handler go, so a failed assertion never
 * leaves a worker waiting for an active job at close.
 */
export function gates(): { hold(): Deferred; openAll(): void } {
  const all: Deferred[] = [];
  return {
    hold: () => {
      const d = deferred();
      all.push(d);
      return d;
    },
    openAll: () => {
      for (const d of all.splice(0)) d.resolve();
    },
  };
}
