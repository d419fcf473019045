import { WorkerHost } from '@nestjs/bullmq';
import type { LoggerService } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { Job, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Subscription } from 'rxjs';
import { deduplicationId } from '../../lib/redis/keys.js';
import type { UniqueJobEvent } from '../../lib/index.js';
import { deferred, type Deferred } from '../support/deferred.js';
import type { TestApp } from '../support/app.js';

/** A logger for `forRoot({ logger })` that keeps every line, so tests can assert on warnings. */
export function captureLogger(): { logger: LoggerService; lines: { log: string[]; warn: string[]; error: string[] } } {
  const lines = { log: [] as string[], warn: [] as string[], error: [] as string[] };
  return {
    lines,
    logger: {
      log: (message: unknown) => void lines.log.push(String(message)),
      warn: (message: unknown) => void lines.warn.push(String(message)),
      error: (message: unknown) => void lines.error.push(String(message)),
    },
  };
}

/** Records every event of the app's `events$` until `stop()`; `next(predicate)` waits for a matching one. */
export class EventLog {
  readonly events: UniqueJobEvent[] = [];
  private readonly waiters: { predicate: (event: UniqueJobEvent) => boolean; done: Deferred<UniqueJobEvent> }[] = [];
  private readonly subscription: Subscription;

  constructor(app: TestApp) {
    this.subscription = app.service.events$.subscribe((event) => {
      this.events.push(event);
      for (const waiter of [...this.waiters]) {
        if (waiter.predicate(event)) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.done.resolve(event);
        }
      }
    });
  }

  of<T extends UniqueJobEvent['type']>(type: T): Extract<UniqueJobEvent, { type: T }>[] {
    return this.events.filter((event): event is Extract<UniqueJobEvent, { type: T }> => event.type === type);
  }

  /** The first event (already seen or future) matching the predicate. */
  next(predicate: (event: UniqueJobEvent) => boolean): Promise<UniqueJobEvent> {
    const seen = this.events.find(predicate);
    if (seen) return Promise.resolve(seen);
    const done = deferred<UniqueJobEvent>();
    this.waiters.push({ predicate, done });
    return done.promise;
  }

  stop(): void {
    this.subscription.unsubscribe();
  }
}

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

/**
 * A handler whose runs can be held: a run of a job whose `data.tag` is held waits until `release(tag)`. Every run
 * resolves `started(tag)` and returns `ran:<tag>`.
 */
export class Gates {
  /** Every gate of the test file, so `afterEach` can let held runs go (a held run would block closing the app). */
  static readonly all = new Set<Gates>();

  static releaseEverything(): void {
    for (const gates of Gates.all) gates.releaseAll();
    Gates.all.clear();
  }

  constructor() {
    Gates.all.add(this);
  }

  private readonly started_ = new Map<string, Deferred<Job>>();
  private readonly gates = new Map<string, Deferred>();

  readonly handler = async (job: Job): Promise<unknown> => {
    const tag = String((job.data as { tag?: unknown }).tag);
    this.startedOf(tag).resolve(job);
    await this.gates.get(tag)?.promise;
    return `ran:${tag}`;
  };

  /** Runs of jobs tagged `tag` wait until `release(tag)`. */
  hold(...tags: string[]): this {
    for (const tag of tags) this.gates.set(tag, deferred());
    return this;
  }

  release(tag: string): void {
    this.gates.get(tag)?.resolve();
  }

  releaseAll(): void {
    for (const gate of this.gates.values()) gate.resolve();
  }

  /** Resolves with the job when a run of a job tagged `tag` starts. */
  started(tag: string): Promise<Job> {
    return this.startedOf(tag).promise;
  }

  private startedOf(tag: string): Deferred<Job> {
    let entry = this.started_.get(tag);
    if (!entry) this.started_.set(tag, (entry = deferred<Job>()));
    return entry;
  }
}

/** Polls `probe` (every 25 ms, at most `timeoutMs`) until it returns something other than undefined/false. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The BullMQ deduplication key that holds a fast-path enqueue lock. */
export function dedupKey(queueName: string, digest: string): string {
  return `bull:${queueName}:de:${deduplicationId(digest)}`;
}

/** The value (holder job id) of a fast-path enqueue lock, or null. */
export function dedupHolder(redis: Redis, queueName: string, digest: string): Promise<string | null> {
  return redis.get(dedupKey(queueName, digest));
}

/** Narrowing helpers for the explicit API's result union. */
export function asEnqueued<R extends { status: string }>(result: R): Extract<R, { status: 'enqueued' }> {
  if (result.status !== 'enqueued') throw new Error(`expected enqueued, got ${JSON.stringify(result)}`);
  return result as Extract<R, { status: 'enqueued' }>;
}

export function asDuplicate<R extends { status: string }>(result: R): Extract<R, { status: 'duplicate' }> {
  if (result.status !== 'duplicate') throw new Error(`expected duplicate, got status ${result.status}`);
  return result as Extract<R, { status: 'duplicate' }>;
}

/** The data of the jobs the handler ran, in order. */
export function runData<T>(app: TestApp): T[] {
  return app.runs.map((job) => job.data as T);
}
