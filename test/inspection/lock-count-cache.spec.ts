import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import type { LockCounts } from '../../lib/index.js';
import { LockCountCache } from '../../lib/ops/inspection/lock-count-cache.js';

const counted = (n: number): LockCounts => ({ enqueueLocks: n, runtimeLocks: 0, deadSet: 0, complete: true });

/** A count the test settles by hand, and how many were started. */
function manualCounts() {
  const pending: { resolve(counts: LockCounts): void; reject(error: Error): void }[] = [];
  const count = () =>
    new Promise<LockCounts>((resolve, reject) => {
      pending.push({ resolve, reject });
    });
  return { count, pending };
}

describe('LockCountCache', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('shares a running count however long it takes, then keeps it cacheMs after it settled', async () => {
    let now = 1_000;
    jest.spyOn(performance, 'now').mockImplementation(() => now);
    const { count, pending } = manualCounts();
    const cache = new LockCountCache(count, 100);
    const first = cache.get();
    now += 10_000; // a slow Redis: the count runs far longer than cacheMs
    expect(cache.get()).toBe(first);
    expect(pending).toHaveLength(1);
    pending[0].resolve(counted(1));
    await expect(first).resolves.toEqual(counted(1));
    now += 99;
    expect(cache.get()).toBe(first);
    now += 1;
    const second = cache.get();
    expect(second).not.toBe(first);
    expect(pending).toHaveLength(2);
    pending[1].resolve(counted(2));
    await expect(second).resolves.toEqual(counted(2));
  });

  it('is not frozen by a wall clock stepped back', async () => {
    let now = 5_000;
    jest.spyOn(performance, 'now').mockImplementation(() => now);
    jest.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 0, 1) - 3_600_000);
    const { count, pending } = manualCounts();
    const cache = new LockCountCache(count, 100);
    const first = cache.get();
    pending[0].resolve(counted(1));
    await first;
    now += 100;
    expect(cache.get()).not.toBe(first);
    expect(pending).toHaveLength(2);
  });

  it('does not keep a failed count, and clear() forgets a kept one', async () => {
    const { count, pending } = manualCounts();
    const cache = new LockCountCache(count, 60_000);
    const failed = cache.get();
    pending[0].reject(new Error('Redis is down'));
    await expect(failed).rejects.toThrow('Redis is down');
    const next = cache.get();
    expect(next).not.toBe(failed);
    pending[1].resolve(counted(3));
    await next;
    expect(cache.get()).toBe(next);
    cache.clear();
    expect(cache.get()).not.toBe(next);
    expect(pending).toHaveLength(3);
    pending[2].resolve(counted(4));
  });
});
