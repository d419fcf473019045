// A run-time lock take whose answer is read only after its lease could have ended (an event-loop stall between the send
// and the read) is asked once more (`RuntimeLease.takeFresh`). That second take used to start a whole new `lockTimeout`
// wait, so a job could wait up to twice `lockTimeout` for the lock, against the option's meaning ("milliseconds a
// run-time lock conflict waits for the holder"). The whole wait is now bounded by `lockTimeout` from the first ask: the
// second take gets what is left of it, and at least one attempt that does not wait.
// The stall is simulated in the store: the first acquire is applied by Redis, and its answer handed back only once its
// lease has ended on the server, another owner has taken the lock, and `answerAfter` ms have passed since it was sent.
import { afterAll, describe, expect, it } from '@jest/globals';
import { performance } from 'node:perf_hooks';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RuntimeLease } from '../../lib/locks/runtime-lease.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { deleteKeys, redisClient, uniqueName } from '../support/redis.js';

const LEASE_MS = 300;

describe('a run-time lock take answered after its lease ended, the lock taken over meanwhile', () => {
  const redis = redisClient();
  const keys: string[] = [];
  afterAll(async () => {
    await deleteKeys(redis, keys);
    redis.disconnect();
  });

  /**
   * A lease with `lockTimeout` on a fresh key whose first acquire is answered `answerAfter` ms after it was sent, once
   * an intruder took the lock (after the job's lease ended on the server). Counts the acquires the lease sends.
   */
  function stalledLease(lockTimeout: number, answerAfter: number) {
    const key = `${uniqueName('ujwait')}:{d}:running`;
    keys.push(key);
    const intruder = new LockStore(new RedisScripts(redis));
    let acquires = 0;
    const store = new (class extends LockStore {
      override async acquire(...args: Parameters<LockStore['acquire']>) {
        const sentAt = performance.now();
        const answer = await super.acquire(...args);
        if (++acquires > 1) return answer;
        // Polled until the job's lease has ended on the server (limit 1: the intruder gets the slot only then).
        while (!(await intruder.acquire(key, 'intruder', 60_000, 1)).acquired) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const left = sentAt + answerAfter - performance.now();
        if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
        return answer;
      }
    })(new RedisScripts(redis));
    const lease = new RuntimeLease(
      store,
      key,
      'job-1',
      { lockTimeout, runtimeLockLease: LEASE_MS, lockLimit: 1 },
      { lost: () => undefined, error: () => undefined },
    );
    return { lease, acquires: () => acquires };
  }

  it('answered after lockTimeout: one more attempt, no wait, refused', async () => {
    const lockTimeout = 1_500;
    const { lease, acquires } = stalledLease(lockTimeout, lockTimeout + 100);
    const askedAt = performance.now();
    const answer = await lease.takeFresh();
    const waited = performance.now() - askedAt;
    expect(answer).toMatchObject({ acquired: false, holder: 'intruder' });
    expect(lease.held).toBe(false);
    // The take that was answered late, and one attempt that did not wait (a fresh wait polls several times).
    expect(acquires()).toBe(2);
    // A fresh lockTimeout wait would end no sooner than twice lockTimeout (plus the late answer's 100 ms).
    expect(waited).toBeLessThan(2 * lockTimeout);
  });

  it('answered within lockTimeout: the second take waits only what is left of it', async () => {
    const lockTimeout = 3_000;
    const { lease, acquires } = stalledLease(lockTimeout, 1_500);
    const askedAt = performance.now();
    const answer = await lease.takeFresh();
    const waited = performance.now() - askedAt;
    expect(answer).toMatchObject({ acquired: false, holder: 'intruder' });
    expect(acquires()).toBeGreaterThan(2); // it did wait, backing off, for the rest of lockTimeout
    expect(waited).toBeGreaterThanOrEqual(lockTimeout - 1); // timers may fire a fraction of a ms early
    // A fresh lockTimeout wait after the late answer would end no sooner than 1.5 s + lockTimeout.
    expect(waited).toBeLessThan(1_500 + lockTimeout);
  });
});
