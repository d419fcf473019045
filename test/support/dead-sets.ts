// Dead sets on their own (DeadSetService without an application), each under a prefix of its own deleted after each
// test, for the tests of the dead set's scripts and bounds.
import { afterAll, afterEach, expect } from '@jest/globals';
import type { Redis } from 'ioredis';
import { DeadSetService, type DeadSetBounds, type EnqueueResult } from '../../lib/index.js';
import type { DeadSetRequeue } from '../../lib/dead-set/dead-set.service.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { deleteKeys, redisClient, scanKeys, uniqueName } from './redis.js';

/** A requeue that always fails, as an enqueue Redis refuses. */
export const refusedRequeue: DeadSetRequeue = async () => {
  throw new Error('enqueue refused');
};

/** A small rejected duplicate (~250 bytes of JSON once stored). */
export const sampleEntry = {
  queue: 'payments',
  jobName: 'settle',
  data: { id: 'a' },
  opts: {},
  digest: `v1:${'ab'.repeat(32)}`,
  existingJobId: '7',
  side: 'client' as const,
  reason: 'Rejected a duplicate',
};

/** What a requeue answers when it enqueued the entry (a job `j1`). */
export const enqueuedResult: EnqueueResult = {
  status: 'enqueued',
  job: { id: 'j1' } as never,
  digest: sampleEntry.digest,
};

/** Requeues that count their calls: `slow` ones wait in the enqueue until {@link release}d, the others answer at once. */
export class CountedRequeues {
  slowCalls = 0;
  fastCalls = 0;
  private released: (() => void) | undefined;

  /** A requeue that waits until released (an enqueue waiting for its Redis). */
  readonly slow: DeadSetRequeue = async () => {
    this.slowCalls++;
    await new Promise<void>((resolve) => (this.released = resolve));
    return enqueuedResult;
  };

  /** A requeue that enqueues at once. */
  readonly fast: DeadSetRequeue = async () => {
    this.fastCalls++;
    return enqueuedResult;
  };

  /** Whether a slow requeue is waiting. */
  get waiting(): boolean {
    return this.released !== undefined;
  }

  release(): void {
    this.released?.();
  }
}

export interface DeadSets {
  /** A plain client, quit after the file. */
  redis: Redis;
  /** The warnings the dead sets logged in this test. */
  warnings: string[];
  /** A dead set (`bounds` over maxSize 10,000 and maxAge 60 s) under a new prefix, or `prefix` (another process's). */
  deadSet(
    bounds?: Partial<DeadSetBounds>,
    requeue?: DeadSetRequeue,
    prefix?: string,
  ): { set: DeadSetService; keys: UniqueJobsKeys; prefix: string };
  /**
   * Two processes on one dead set (claims of `retryClaimMs` 300 ms): `slow`, whose retries wait in their enqueue until
   * `requeues.release()`, and `other`, whose retries enqueue at once.
   */
  racing(): {
    requeues: CountedRequeues;
    slow: DeadSetService;
    other: DeadSetService;
    keys: UniqueJobsKeys;
    prefix: string;
  };
}

/** Asks `set` to retry `id` again and again for `ms`: the entry is claimed elsewhere, so every answer is `undefined`. */
export async function expectNeverTaken(set: DeadSetService, id: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) await expect(set.retry(id)).resolves.toBeUndefined();
}

/** Call once, at the top of a `describe`. */
export function useDeadSets(label: string): DeadSets {
  const redis = redisClient();
  const prefixes: string[] = [];
  const warnings: string[] = [];
  afterEach(async () => {
    for (const prefix of prefixes.splice(0)) await deleteKeys(redis, await scanKeys(redis, `${prefix}:*`));
    warnings.length = 0;
  });
  afterAll(async () => {
    await redis.quit();
  });
  const deadSet: DeadSets['deadSet'] = (bounds = {}, requeue = refusedRequeue, prefix = uniqueName(label)) => {
    prefixes.push(prefix);
    const keys = new UniqueJobsKeys(prefix);
    const set = new DeadSetService(
      redis,
      new RedisScripts(redis),
      keys,
      { maxSize: 10_000, maxAge: 60_000, ...bounds },
      requeue,
      { warn: (message) => void warnings.push(message) },
    );
    return { set, keys, prefix };
  };
  return {
    redis,
    warnings,
    deadSet,
    racing: () => {
      const requeues = new CountedRequeues();
      const { set: slow, keys, prefix } = deadSet({ retryClaimMs: 300 }, requeues.slow);
      const { set: other } = deadSet({ retryClaimMs: 300 }, requeues.fast, prefix);
      return { requeues, slow, other, keys, prefix };
    },
  };
}
