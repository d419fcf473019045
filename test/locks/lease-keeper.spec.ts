// The lease keeper's "expired" answer under an event-loop stall, on a real lock in Redis: a renewal sent just before
// the stall is applied by Redis at once, but its answer is read only after the stall. That late answer must not make
// the lease look renewed after the stall: the lease ended during it (a duplicate could take the lock), and the holder
// reports it lost when it gives the lock back. (A flaky chaos run of lease-expiry.chaos.ts found this: the holder's
// release then found the lock gone and reported nothing.) The same holds for the acquire itself: its answer too can be
// read after a stall (another job's CPU-bound handler in the same process), so a run-time lease counts from when the
// acquire was sent (found by the session-9 review).
import { setImmediate as nextMacrotask } from 'node:timers/promises';
import { afterAll, describe, expect, it } from '@jest/globals';
import { LeaseKeeper } from '../../lib/locks/lease-keeper.js';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RuntimeLease } from '../../lib/locks/runtime-lease.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { deferred } from '../support/deferred.js';
import { deleteKeys, redisClient, uniqueName } from '../support/redis.js';

const LEASE_MS = 300;

/** Blocks the event loop, as a CPU-bound handler does. */
function stall(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy: no timer, no socket read
  }
}

describe('leases under an event-loop stall', () => {
  const redis = redisClient();
  const store = new LockStore(new RedisScripts(redis));
  const prefix = uniqueName('ujlease');
  const key = `${prefix}:{v1:${'0'.repeat(64)}}:running`;
  const stalledKey = `${prefix}:{v1:${'1'.repeat(64)}}:running`;
  // Same hash tag: on a Cluster the same node, so its connection is open and the script cached there.
  const warm = `${prefix}:{v1:${'1'.repeat(64)}}:queued`;

  afterAll(async () => {
    await deleteKeys(redis, [key, stalledKey, warm]);
    await redis.quit();
  });

  it('counts a lease from when its renewal was sent, so an answer read after a stall does not extend it', async () => {
    expect((await store.acquire(key, 'holder', LEASE_MS, 1)).acquired).toBe(true);
    const answered = deferred();
    const lost: string[] = [];
    const keeper = new LeaseKeeper(
      async () => {
        const renewal = store.retime(key, 'holder', LEASE_MS, 'never'); // sent now, applied by Redis at once
        stall(LEASE_MS + 200); // the answer waits in the socket until the stall ends
        const held = await renewal;
        answered.resolve();
        return held;
      },
      LEASE_MS,
      { lost: () => void lost.push('lost'), error: (error) => void lost.push(String(error)) },
    );
    try {
      await answered.promise;
      await nextMacrotask(); // the keeper has taken the answer in
      expect(keeper.expired).toBe(true);
      keeper.reportLost();
      expect(lost).toEqual(['lost']);
    } finally {
      keeper.stop();
    }
  });

  it('renews first a third of a lease after the take was sent, not after its answer was read', async () => {
    const renewed = deferred<number>();
    const readAt = performance.now();
    // The take was sent half a lease ago (its answer read late): its first renewal is due already. (`takenAt` is on
    // `performance.now()`'s clock, as the library passes it.)
    const keeper = new LeaseKeeper(
      async () => {
        renewed.resolve(performance.now());
        return true;
      },
      3_000,
      { lost: () => undefined, error: () => undefined },
      readAt - 1_500,
    );
    try {
      expect((await renewed.promise) - readAt).toBeLessThan(500);
      expect(keeper.expired).toBe(false);
    } finally {
      keeper.stop();
    }
  });

  it('waits one period at most for its first renewal when the take time is on another clock', async () => {
    const renewed = deferred<number>();
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    const createdAt = performance.now();
    // A wall-clock time where a monotonic one belongs: decades ahead of `performance.now()`.
    const keeper = new LeaseKeeper(
      async () => {
        renewed.resolve(performance.now());
        return true;
      },
      300,
      { lost: () => undefined, error: () => undefined },
      Date.now(),
    );
    try {
      const at = await renewed.promise;
      expect(at - createdAt).toBeGreaterThanOrEqual(99); // one period (100 ms), not a 1 ms overflowed timer
      await nextMacrotask();
      expect(warnings).not.toContain('TimeoutOverflowWarning');
    } finally {
      keeper.stop();
      process.off('warning', onWarning);
    }
  });

  it('reports lockLost when the lease ended during a stall between the acquire being sent and its answer read', async () => {
    // Connected (to the key's node on a Cluster), and the script cached there: the acquire below is one EVALSHA
    // written synchronously, before the stall.
    expect((await store.acquire(warm, 'x', 1000, 1)).acquired).toBe(true);
    const lost: string[] = [];
    const lease = new RuntimeLease(
      store,
      stalledKey,
      'holder',
      { lockTimeout: 0, runtimeLockLease: LEASE_MS, lockLimit: 1 },
      { lost: () => void lost.push('lost'), error: (error) => void lost.push(String(error)) },
    );
    const taking = lease.take(); // EVALSHA written now, applied by Redis at once
    stall(LEASE_MS + 200); // e.g. another job's CPU-bound handler (worker concurrency > 1)
    expect((await taking).acquired).toBe(true);
    // The holder's lease really ended during the stall: a duplicate takes the lock (limit 1).
    expect((await store.acquire(stalledKey, 'duplicate', LEASE_MS, 1)).acquired).toBe(true);
    // The holder's short handler returns and gives the lock back: it ran concurrently with the duplicate's slot.
    expect(await lease.release()).toBe(false);
    expect(lost).toEqual(['lost']);
  });
});
