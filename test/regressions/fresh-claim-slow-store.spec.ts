// claimFresh (a plain-mode claim answered late is confirmed by a renewal before the handler starts) against a store
// that answers every command a little more than a third of a lease after it was sent (a slow link, a loaded
// database): each answer, the claim's and the renewals', is "late" by the first renewal's standard, though well within
// the lease. It renewed forever, the handler never started; it now hands the claim back once a renewal confirmed it.
// A store slower than the lease itself fails the attempt after a few tries instead of looping.
import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { UniqueJobsError } from '../../lib/errors/unique-jobs.error.js';
import { claimFresh } from '../../lib/idempotency/fresh-claim.js';
import type { IdempotencyStore } from '../../lib/idempotency/idempotency-store.interface.js';
import { RedisIdempotencyStore } from '../../lib/idempotency/stores/redis-idempotency.store.js';
import { redisClient, uniqueName } from '../support/redis.js';

const LEASE_MS = 300;
const SLOW_MS = 130; // > LEASE_MS / 3, < LEASE_MS

describe('claimFresh with a store slower than a third of the lease', () => {
  const client = redisClient();
  const prefix = uniqueName('fresh-claim');
  afterAll(async () => {
    const keys = await client.keys(`${prefix}*`);
    if (keys.length) await client.del(...keys);
    await client.quit();
  });

  /** The Redis store, each answer handed back `slowMs` after it came; `renewals()` counts its renewals. */
  function slowStore(slowMs: number): { store: IdempotencyStore; renewals: () => number } {
    const store = new RedisIdempotencyStore({ client, prefix });
    const slow = <T>(answer: Promise<T>) =>
      answer.then((value) => new Promise<T>((resolve) => setTimeout(() => resolve(value), slowMs)));
    let renewals = 0;
    const claim = store.claim.bind(store);
    const renew = store.renew.bind(store);
    store.claim = (request) => slow(claim(request));
    store.renew = (ref, leaseMs) => {
      renewals++;
      return slow(renew(ref, leaseMs));
    };
    return { store, renewals: () => renewals };
  }

  const request = () => ({
    scope: 'q:sync',
    key: randomUUID(),
    owner: randomUUID(),
    leaseMs: LEASE_MS,
    fingerprint: undefined,
    jobId: '1',
  });

  it('answers within the lease: the claim is handed back after one renewal', async () => {
    const { store, renewals } = slowStore(SLOW_MS);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      claimFresh(store, request()).then((fresh) => fresh.claim),
      new Promise<'looping'>((resolve) => (timer = setTimeout(() => resolve('looping'), 3_000))),
    ]);
    clearTimeout(timer);
    expect(outcome).toMatchObject({ claimed: true });
    expect(renewals()).toBe(1);
  });

  it('answers later than the lease: the attempt fails after a few tries', async () => {
    const { store, renewals } = slowStore(LEASE_MS + 50);
    await expect(claimFresh(store, request())).rejects.toThrow(UniqueJobsError);
    expect(renewals()).toBe(5);
  });
});
