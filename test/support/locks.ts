import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { EnqueueResult } from '../../lib/index.js';
import { deduplicationId } from '../../lib/redis/keys.js';
import { parseRuntimeLockOwner, runtimeLockOwner } from '../../lib/redis/runtime-lock-owner.js';
import { isParkedScore } from '../../lib/locks/lock-marks.js';
import type { TestApp } from './app.js';
import { bullOptions, bullPrefix } from './redis.js';
import { waitFor } from './wait.js';

/** The lock arguments of most test jobs: their `id`. */
export const byId = (data: { id: string }) => data.id;

/** BullMQ's deduplication key holding a fast-path enqueue lock. */
export function dedupKey(queueName: string, digest: string): string {
  return `${bullPrefix()}:${queueName}:de:${deduplicationId(digest)}`;
}

/** The value (holder job id) of a fast-path enqueue lock, or null. */
export function dedupHolder(redis: Redis, queueName: string, digest: string): Promise<string | null> {
  return redis.get(dedupKey(queueName, digest));
}

/** The library's semaphore-path enqueue lock. */
export function queuedKey(prefix: string, digest: string): string {
  return `${prefix}:{${digest}}:queued`;
}

/** The library's `until_expired` enqueue lock. */
export function expiringKey(prefix: string, digest: string): string {
  return `${prefix}:{${digest}}:expiring`;
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

/**
 * Owners of a sorted-set lock (run-time or semaphore path), as job ids: a run-time lock's member names its job's queue
 * too (`runtimeLockOwner`; {@link members} reads the members as they are).
 */
export async function owners(redis: Redis, key: string): Promise<string[]> {
  const read = await members(redis, key);
  return (key.endsWith(':running') ? read.map((owner) => parseRuntimeLockOwner(owner).jobId) : read).sort();
}

/** The member a job of the app's queue writes into a run-time lock (`runtimeLockOwner`). */
export function runtimeOwner(app: { queue: { qualifiedName: string } }, jobId: string): string {
  return runtimeLockOwner(jobId, app.queue.qualifiedName);
}

/**
 * Rewrites the run-time lock slot a job of the app holds as an earlier build wrote it: under `former` (the bare id, or
 * the queue-name pair of a lock across queues: `legacyRuntimeLockOwner`), with the same score (lease and mark).
 */
export async function asEarlierBuild(
  redis: Redis,
  key: string,
  app: { queue: { qualifiedName: string } },
  jobId: string,
  former: string,
): Promise<void> {
  const owner = runtimeOwner(app, jobId);
  const score = await redis.zscore(key, owner);
  if (score === null) throw new Error(`job ${jobId} holds no slot of ${key}`);
  await redis.multi().zrem(key, owner).zadd(key, score, former).exec();
}

/** The members of a sorted-set lock, as written. */
export async function members(redis: Redis, key: string): Promise<string[]> {
  return (await redis.zrange(key, '0', '-1')).sort();
}

/**
 * Waits until a step job's run-time lock slot (`member` of `key`, see {@link runtimeOwner}) is parked for its next
 * delivery. Not the job's `delayed` state: the job is delayed as soon as its handler moved it, before the attempt ended
 * and the worker parked the slot.
 */
export async function waitForParked(redis: Redis, key: string, member: string): Promise<void> {
  await waitFor('the job parked', async () => {
    const score = await redis.zscore(key, member);
    return score !== null && isParkedScore(Number(score));
  });
}

/**
 * Waits until the attempt holding a run-time lock slot (`member` of `key`) has ended: its slot parked (a step of a step
 * job) or given back. A job BullMQ moved or failed meanwhile (its child failed it) is there before its attempt ends.
 */
export async function waitForAttemptEnd(redis: Redis, key: string, member: string): Promise<void> {
  await waitFor('the attempt to end', async () => {
    const score = await redis.zscore(key, member);
    return score === null || isParkedScore(Number(score));
  });
}

/** The owners of each `sync` job's slot-set enqueue lock, by the `id` of its data. */
export async function slotOwners(
  redis: Redis,
  app: TestApp,
  ids: readonly string[],
): Promise<Record<string, string[]>> {
  const key = (id: string) => queuedKey(app.prefix, digestOf(app, 'sync', { id }));
  return Object.fromEntries(await Promise.all(ids.map(async (id) => [id, await owners(redis, key(id))] as const)));
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

/** The job of an `enqueued` result (fails the test on a duplicate). */
export function enqueuedJob(result: EnqueueResult): Job {
  return asEnqueued(result).job as Job;
}

/**
 * Removes a job through a Queue the application did not register: behind the library's back, so a general-path slot
 * stays (a job removed through a guarded queue gives its slot back itself: test/locks/guarded-removal.spec.ts).
 */
export async function removeUnguarded(queueName: string, jobId: string): Promise<void> {
  const plain = new Queue(queueName, bullOptions());
  try {
    if ((await plain.remove(jobId)) !== 1) throw new Error(`job ${jobId} of ${queueName} was not removed`);
  } finally {
    await plain.close();
  }
}
