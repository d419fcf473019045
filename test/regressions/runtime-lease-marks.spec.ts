// Found by a review of session 27's own change: its first form told a run-time lock's takes apart by the lease expiry
// each renewal wrote, so two renewals in flight at once (Redis answering later than a third of the lease) and a
// renewal applied whose answer was lost (a command timeout, a reset connection) both left the holder naming an old
// expiry: it reported `lockLost` for a lease it held, stopped renewing, and its release left the slot behind. A take is
// now told by a mark its lease expiry carries (`takeMark`), which its renewals keep.
import { afterAll, describe, expect, it } from '@jest/globals';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RuntimeLease } from '../../lib/locks/runtime-lease.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { failScriptAnswerOnce } from '../support/lost-answers.js';
import { deleteKeys, redisClient, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/** A lease renewed every 300 ms. */
const LEASE_MS = 900;

describe('a run-time lease whose renewals are answered late or not at all', () => {
  const redis = redisClient();
  const keys: string[] = [];
  afterAll(async () => {
    await deleteKeys(redis, keys);
    redis.disconnect();
  });

  /** A lease on a fresh key, counting the renewals it sends and the losses it reports. */
  async function takeLease() {
    const key = `${uniqueName('ujmark')}:{d}:running`;
    keys.push(key);
    const counts = { renewals: 0, lost: 0 };
    const store = new (class extends LockStore {
      override renewMarked(...args: Parameters<LockStore['renewMarked']>) {
        counts.renewals++;
        return super.renewMarked(...args);
      }
    })(new RedisScripts(redis));
    const lease = new RuntimeLease(
      store,
      key,
      'job-1',
      { lockTimeout: 0, runtimeLockLease: LEASE_MS, lockLimit: 1 },
      { lost: () => counts.lost++, error: () => undefined },
    );
    expect((await lease.take()).acquired).toBe(true);
    const score = async () => Number(await redis.zscore(key, 'job-1'));
    return { key, lease, counts, score };
  }

  it('a renewal applied whose answer was lost: later renewals and the release still hold', async () => {
    const { key, lease, counts, score } = await takeLease();
    const fault = failScriptAnswerOnce(redis, 'renewLock');
    await waitFor('a renewal whose answer is lost', () => fault.failed() === 1);
    const renewed = await score();
    await waitFor('a renewal after it', async () => (await score()) > renewed);
    expect(await lease.release()).toBe(true);
    expect(await redis.exists(key)).toBe(0);
    expect(counts.lost).toBe(0);
  });

  it('two renewals in flight at once: neither is refused, the lease goes on', async () => {
    const { lease, counts, score } = await takeLease();
    const stream = (redis as unknown as { stream: { pause(): void; resume(): void } }).stream;
    const sent = counts.renewals;
    stream.pause(); // answers are not read: renewals pile up unanswered
    try {
      await waitFor('two renewals in flight', () => counts.renewals >= sent + 2);
    } finally {
      stream.resume();
    }
    const renewed = await score();
    await waitFor('a renewal after them', async () => (await score()) > renewed);
    expect(counts.lost).toBe(0);
    expect(await lease.release()).toBe(true);
  });
});
