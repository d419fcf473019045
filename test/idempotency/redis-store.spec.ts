// The Redis idempotency store: the shared contract (over five connections, so races cross clients), then what is
// specific to Redis: record keys under the prefix that hold no user data, and a TTL on every record in every state.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib/idempotency/stores/redis-idempotency.store.js';
import { deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { describeIdempotencyStoreContract } from '../../lib/ops/store-contract/index.js';

/** How long the Redis store keeps an in_progress record after its lease (lib/redis/scripts/includes/keepClaim.lua). */
const IN_PROGRESS_GRACE_MS = 600_000;

async function deletePrefix(client: Redis, prefix: string): Promise<void> {
  await deleteKeys(client, await scanKeys(client, `${prefix}:*`));
}

describeIdempotencyStoreContract<never>('redis', {
  transactional: false,
  async create() {
    const prefix = uniqueName('idem-contract');
    const clients = Array.from({ length: 5 }, () => redisClient());
    const [store, ...peers] = clients.map((client) => new RedisIdempotencyStore({ client, prefix }));
    return {
      store,
      peers,
      async cleanup() {
        await deletePrefix(clients[0], prefix);
        await Promise.all(clients.map((client) => client.quit()));
      },
    };
  },
});

describe('RedisIdempotencyStore keys', () => {
  let redis: Redis;
  const prefixes: string[] = [];

  beforeAll(() => {
    redis = redisClient();
  });

  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    await redis.quit();
  });

  /** A store with a prefix of its own, so that its keys are exactly the ones a case created. */
  const isolatedStore = () => {
    const prefix = uniqueName('idem-redis');
    prefixes.push(prefix);
    return { prefix, store: new RedisIdempotencyStore({ client: redis, prefix }) };
  };

  /** The one key of a store's prefix. */
  const onlyKey = async (prefix: string): Promise<string> => {
    const keys = await scanKeys(redis, `${prefix}:*`);
    expect(keys).toHaveLength(1);
    return keys[0];
  };

  it('keeps a record under the prefix, in a key holding neither the user key nor the scope', async () => {
    const { prefix, store } = isolatedStore();
    const scope = 'payments-scope';
    const key = 'evt_{secret}*';
    expect(
      await store.claim({ scope, key, owner: 'o1', leaseMs: 60_000, fingerprint: 'fp-secret', jobId: 'job-secret' }),
    ).toEqual({ claimed: true, takeover: false });

    const recordKey = await onlyKey(prefix);
    expect(recordKey.startsWith(`${prefix}:`)).toBe(true);
    for (const raw of [key, 'secret', 'evt_', scope, 'fp-secret', 'job-secret']) {
      expect(recordKey).not.toContain(raw);
    }
    // The record holds them (for operators), and reads back by them.
    expect(await store.get(scope, key)).toMatchObject({ scope, key, state: 'in_progress', owner: 'o1' });
    // Another key, and the same key in another scope, are other records.
    expect(
      await store.claim({
        scope,
        key: 'evt_{other}*',
        owner: 'o2',
        leaseMs: 60_000,
        fingerprint: undefined,
        jobId: undefined,
      }),
    ).toEqual({ claimed: true, takeover: false });
    expect(
      await store.claim({
        scope: 'other',
        key,
        owner: 'o3',
        leaseMs: 60_000,
        fingerprint: undefined,
        jobId: undefined,
      }),
    ).toEqual({ claimed: true, takeover: false });
    const keys = await scanKeys(redis, `${prefix}:*`);
    expect(keys).toHaveLength(3);
    for (const each of keys) {
      expect(each.startsWith(`${prefix}:`)).toBe(true);
      expect(each).not.toContain('secret');
      expect(each).not.toContain('other');
    }
  });

  it('gives every record a TTL that outlasts its lease or retention: in_progress, renewed, completed, failed', async () => {
    const { prefix, store } = isolatedStore();
    const scope = 'ttl';
    const leaseMs = 60_000;
    const ttlMs = 120_000;

    /** PTTL of the record, checked against what remains of its lease or retention (the store's expiresInMs). */
    const expectTtl = async (key: string, bound: number): Promise<number> => {
      const recordKey = await onlyKey(prefix);
      const pttl = await redis.pttl(recordKey);
      expect(pttl).toBeGreaterThan(0);
      const refused = await store.claim({
        scope,
        key,
        owner: 'probe',
        leaseMs,
        fingerprint: undefined,
        jobId: undefined,
      });
      if (refused.claimed) throw new Error('expected a live record');
      // The key must not vanish while the record is live (1 ms: PTTL and TIME rounding).
      expect(pttl).toBeGreaterThanOrEqual(refused.expiresInMs - 1);
      expect(pttl).toBeLessThanOrEqual(bound);
      return pttl;
    };

    const completedKey = 'to-complete';
    expect(await store.claim({ scope, key: completedKey, owner: 'a', leaseMs, fingerprint: 'fp', jobId: '1' })).toEqual(
      { claimed: true, takeover: false },
    );
    await expectTtl(completedKey, leaseMs + IN_PROGRESS_GRACE_MS);
    expect(await store.renew({ scope, key: completedKey, owner: 'a' }, leaseMs)).toBe(true);
    await expectTtl(completedKey, leaseMs + IN_PROGRESS_GRACE_MS);
    expect(await store.complete({ scope, key: completedKey, owner: 'a' }, { result: '{"ok":1}', ttlMs })).toBe(true);
    expect(await store.get(scope, completedKey)).toMatchObject({ state: 'completed' });
    await expectTtl(completedKey, ttlMs);
    expect(await store.delete(scope, completedKey)).toBe(true);

    const failedKey = 'to-fail';
    expect(
      await store.claim({ scope, key: failedKey, owner: 'b', leaseMs, fingerprint: undefined, jobId: undefined }),
    ).toEqual({
      claimed: true,
      takeover: false,
    });
    await expectTtl(failedKey, leaseMs + IN_PROGRESS_GRACE_MS);
    expect(
      await store.fail({ scope, key: failedKey, owner: 'b' }, { error: '{"name":"Error","message":"no"}', ttlMs }),
    ).toBe(true);
    expect(await store.get(scope, failedKey)).toMatchObject({ state: 'failed' });
    await expectTtl(failedKey, ttlMs);

    // A completed record with no result still expires.
    expect(await store.delete(scope, failedKey)).toBe(true);
    const quietKey = 'quiet';
    expect(
      await store.claim({ scope, key: quietKey, owner: 'c', leaseMs, fingerprint: undefined, jobId: undefined }),
    ).toEqual({
      claimed: true,
      takeover: false,
    });
    expect(await store.complete({ scope, key: quietKey, owner: 'c' }, { result: undefined, ttlMs })).toBe(true);
    await expectTtl(quietKey, ttlMs);
  });

  it('removes an expired record by its TTL, leaving no key behind', async () => {
    const { prefix, store } = isolatedStore();
    const scope = 'ttl-end';
    expect(
      await store.claim({ scope, key: 'k', owner: 'a', leaseMs: 60_000, fingerprint: undefined, jobId: undefined }),
    ).toEqual({ claimed: true, takeover: false });
    expect(await store.complete({ scope, key: 'k', owner: 'a' }, { result: '1', ttlMs: 1500 })).toBe(true);
    await onlyKey(prefix);

    await waitFor('the record key to expire', async () => (await scanKeys(redis, `${prefix}:*`)).length === 0);
    expect(await store.get(scope, 'k')).toBeUndefined();
  });
});
