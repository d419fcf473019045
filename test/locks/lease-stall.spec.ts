// A run-time lock taken just before an event-loop stall (another job's CPU-bound handler in the same process): the
// acquire's answer is read after the stall, but the lease counts from when the acquire was sent, so a lease that ended
// during the stall, and that a duplicate then took, is reported lost at release (found by the session-9 review).
import { afterAll, describe, expect, it } from '@jest/globals';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RuntimeLease } from '../../lib/locks/runtime-lease.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { deleteKeys, redisClient, uniqueName } from '../support/redis.js';

const LEASE_MS = 300;

function stall(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy
  }
}

describe('run-time lease under an event-loop stall at its acquire', () => {
  const redis = redisClient();
  const store = new LockStore(new RedisScripts(redis));
  const prefix = uniqueName('leasestall');
  const key = `${prefix}:{v1:${'1'.repeat(64)}}:running`;
  // Same hash tag: on a Cluster the same node, so its connection is open and the script cached there.
  const warm = `${prefix}:{v1:${'1'.repeat(64)}}:queued`;

  afterAll(async () => {
    await deleteKeys(redis, [key, warm]);
    await redis.quit();
  });

  it('reports lockLost when the lease ended during a stall between the acquire being sent and its answer read', async () => {
    // Connected (to the key's node on a Cluster), and the script cached there: the acquire below is one EVALSHA
    // written synchronously, before the stall.
    expect((await store.acquire(warm, 'x', 1000, 1)).acquired).toBe(true);
    const lost: string[] = [];
    const lease = new RuntimeLease(
      store,
      key,
      'holder',
      { lockTimeout: 0, runtimeLockLease: LEASE_MS, lockLimit: 1 },
      { lost: () => void lost.push('lost'), error: (error) => void lost.push(String(error)) },
    );
    const taking = lease.take(); // EVALSHA written now, applied by Redis at once
    stall(LEASE_MS + 200); // e.g. another job's CPU-bound handler (worker concurrency > 1)
    expect((await taking).acquired).toBe(true);
    // The holder's lease really ended during the stall: a duplicate takes the lock (limit 1).
    expect((await store.acquire(key, 'duplicate', LEASE_MS, 1)).acquired).toBe(true);
    // The holder's short handler returns and gives the lock back: it ran concurrently with the duplicate's slot.
    expect(await lease.release()).toBe(false);
    expect(lost).toEqual(['lost']);
  });
});
