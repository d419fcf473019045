import { expect, it } from '@jest/globals';
import type { IdempotencyStore } from '../../idempotency/idempotency-store.interface.js';
import type { ContractContext } from './contract-context.js';
import {
  LEASE_MS,
  SHORT_LEASE_MS,
  RETENTION_MS,
  SHORT_RETENTION_MS,
  ROUNDING_MS,
  CLOCK_SKEW_MS,
  CONTENDERS,
  SCOPE,
  newKey,
  newOwner,
  jobOf,
  fingerprintOf,
  refOf,
  claimOf,
  refusedClaim,
  liveRecord,
  untilAbsent,
  EXPIRY_CASE_TIMEOUT_MS,
} from './contract-support.js';

/** Claims: a fresh claim, a refused one, concurrent claimants, takeovers of ended leases and retention. */
export function claimCases<Transaction>(context: ContractContext<Transaction>): void {
  const { setup, current, storeOf, contenders } = context;
  it('implements runInTransaction exactly when declared transactional', () => {
    expect(typeof storeOf().runInTransaction).toBe(setup.transactional ? 'function' : 'undefined');
    if (setup.transactional) expect(current().probe).toBeDefined();
  });

  it('claims an absent key: an in_progress record of the claimant, whose lease ends leaseMs from the claim', async () => {
    const store = storeOf();
    const key = newKey('claim');
    const owner = newOwner();
    const before = Date.now();

    expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });

    const record = await liveRecord(store, SCOPE, key);
    expect(record).toEqual({
      scope: SCOPE,
      key,
      state: 'in_progress',
      owner,
      jobId: jobOf(owner),
      fingerprint: fingerprintOf(key),
      result: undefined,
      error: undefined,
      attempts: 1,
      createdAt: expect.any(Number),
      expiresAt: expect.any(Number),
    });
    // Milliseconds since the epoch (not seconds, not microseconds), within a generous clock skew.
    expect(Math.abs(record.createdAt - before)).toBeLessThan(CLOCK_SKEW_MS);
    // The lease ends leaseMs after the claim, by the store's clock.
    expect(record.expiresAt - record.createdAt).toBeGreaterThanOrEqual(LEASE_MS - ROUNDING_MS);
    expect(record.expiresAt - record.createdAt).toBeLessThanOrEqual(LEASE_MS + ROUNDING_MS);

    // What the store says remains of the lease agrees with expiresAt: the store's "now" it implies lies between the
    // claim and this moment.
    const refused = refusedClaim(await store.claim(claimOf(key, newOwner())));
    const elapsed = Date.now() - before;
    expect(refused.expiresInMs).toBeGreaterThan(0);
    expect(refused.expiresInMs).toBeLessThanOrEqual(LEASE_MS);
    expect(refused.expiresInMs).toBeGreaterThanOrEqual(LEASE_MS - elapsed - ROUNDING_MS);
    const storeNow = record.expiresAt - refused.expiresInMs;
    expect(storeNow).toBeGreaterThanOrEqual(record.createdAt - ROUNDING_MS);
    expect(storeNow).toBeLessThanOrEqual(record.createdAt + elapsed + ROUNDING_MS);
  });

  it('refuses a second claim of a live key and answers the first owner’s record, changing nothing', async () => {
    const store = storeOf();
    const key = newKey('second');
    const first = newOwner();
    expect(await store.claim(claimOf(key, first))).toEqual({ claimed: true, takeover: false });
    const before = await liveRecord(store, SCOPE, key);

    const second = newOwner();
    const refused = refusedClaim(
      await store.claim(claimOf(key, second, { fingerprint: 'other-fingerprint', jobId: 'other-job' })),
    );
    expect(refused.record).toEqual(before);
    expect(refused.record).toMatchObject({ state: 'in_progress', owner: first, attempts: 1 });
    expect(refused.expiresInMs).toBeGreaterThan(0);
    expect(refused.expiresInMs).toBeLessThanOrEqual(LEASE_MS);

    // The owner itself cannot claim its live key again either.
    const again = refusedClaim(await store.claim(claimOf(key, first)));
    expect(again.record).toEqual(before);

    expect(await store.get(SCOPE, key)).toEqual(before);
  });

  it(`lets exactly one of ${CONTENDERS} concurrent claimants win`, async () => {
    const stores = contenders();
    for (let round = 0; round < 3; round++) {
      const key = newKey(`race-${round}`);
      const winner = await raceFor(stores, key, { takeover: false, attempts: 1 });
      expect(await storeOf().get(SCOPE, key)).toMatchObject({
        state: 'in_progress',
        owner: winner,
        jobId: jobOf(winner),
        attempts: 1,
      });
    }
  });

  it(
    'does not let a different payload take over an ended claim: it answers the record, for a mismatch',
    async () => {
      const store = storeOf();
      const key = newKey('takeover-other-payload');
      const crashed = newOwner();
      expect(await store.claim(claimOf(key, crashed, { leaseMs: SHORT_LEASE_MS, fingerprint: 'fp-100' }))).toEqual({
        claimed: true,
        takeover: false,
      });
      await untilAbsent(store, key);

      const other = await store.claim(claimOf(key, newOwner(), { fingerprint: 'fp-999' }));
      expect(other).toMatchObject({
        claimed: false,
        expiresInMs: 0,
        record: { state: 'in_progress', owner: crashed, fingerprint: 'fp-100' },
      });
      // The same payload (the crashed job's retry) takes it over.
      const retry = newOwner();
      expect(await store.claim(claimOf(key, retry, { fingerprint: 'fp-100' }))).toEqual({
        claimed: true,
        takeover: true,
      });
      expect(await liveRecord(store, SCOPE, key)).toMatchObject({ owner: retry, fingerprint: 'fp-100', attempts: 2 });
    },
    EXPIRY_CASE_TIMEOUT_MS,
  );

  it(
    'treats an in_progress record whose lease ended as absent; the next claim takes it over',
    async () => {
      const store = storeOf();
      const key = newKey('lease');
      const stalled = newOwner();
      expect(await store.claim(claimOf(key, stalled, { leaseMs: SHORT_LEASE_MS }))).toEqual({
        claimed: true,
        takeover: false,
      });
      const first = await liveRecord(store, SCOPE, key);
      expect(first).toMatchObject({ state: 'in_progress', owner: stalled });

      await untilAbsent(store, key);

      const next = newOwner();
      expect(await store.claim(claimOf(key, next, { fingerprint: undefined, jobId: 'job-of-the-retry' }))).toEqual({
        claimed: true,
        takeover: true,
      });
      const record = await liveRecord(store, SCOPE, key);
      expect(record).toEqual({
        scope: SCOPE,
        key,
        state: 'in_progress',
        owner: next,
        jobId: 'job-of-the-retry',
        // A claim that does not compare payloads takes any ended claim over, and stores no fingerprint.
        fingerprint: undefined,
        result: undefined,
        error: undefined,
        attempts: 2,
        // When the record was first claimed: the takeover continues it.
        createdAt: first.createdAt,
        expiresAt: expect.any(Number),
      });
      expect(record.expiresAt).toBeGreaterThan(first.expiresAt);

      // The stalled holder can change nothing any more.
      const old = refOf(key, stalled);
      expect(await store.complete(old, { result: '"late"', ttlMs: RETENTION_MS })).toBe(false);
      expect(await store.fail(old, { error: '{"name":"Error","message":"late"}', ttlMs: RETENTION_MS })).toBe(false);
      expect(await store.renew(old, LEASE_MS)).toBe(false);
      expect(await store.release(old)).toBe(false);
      expect(await store.get(SCOPE, key)).toEqual(record);
    },
    EXPIRY_CASE_TIMEOUT_MS,
  );

  it(
    `lets exactly one of ${CONTENDERS} concurrent claimants take over an ended lease`,
    async () => {
      const stores = contenders();
      const store = storeOf();
      const key = newKey('takeover-race');
      expect(await store.claim(claimOf(key, newOwner(), { leaseMs: SHORT_LEASE_MS }))).toEqual({
        claimed: true,
        takeover: false,
      });
      await untilAbsent(store, key);

      const winner = await raceFor(stores, key, { takeover: true, attempts: 2 });
      expect(await store.get(SCOPE, key)).toMatchObject({ state: 'in_progress', owner: winner, attempts: 2 });
    },
    EXPIRY_CASE_TIMEOUT_MS,
  );

  it(
    'treats a completed or failed record whose retention ended as absent; the next claim is a fresh one',
    async () => {
      const store = storeOf();
      const settle = async (state: 'completed' | 'failed') => {
        const key = newKey(`retention-${state}`);
        const owner = newOwner();
        expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
        const ref = refOf(key, owner);
        const settled =
          state === 'completed'
            ? await store.complete(ref, { result: '{"old":true}', ttlMs: SHORT_RETENTION_MS })
            : await store.fail(ref, { error: '{"name":"Error","message":"old"}', ttlMs: SHORT_RETENTION_MS });
        expect(settled).toBe(true);
        expect(await store.get(SCOPE, key)).toMatchObject({ state, owner });
        return key;
      };
      const keys = await Promise.all([settle('completed'), settle('failed')]);

      for (const key of keys) {
        await untilAbsent(store, key);
        const next = newOwner();
        expect(await store.claim(claimOf(key, next, { fingerprint: undefined, jobId: undefined }))).toEqual({
          claimed: true,
          takeover: false,
        });
        const record = await liveRecord(store, SCOPE, key);
        expect(record).toEqual({
          scope: SCOPE,
          key,
          state: 'in_progress',
          owner: next,
          jobId: undefined,
          fingerprint: undefined,
          result: undefined,
          error: undefined,
          attempts: 1,
          createdAt: expect.any(Number),
          expiresAt: expect.any(Number),
        });
      }
    },
    EXPIRY_CASE_TIMEOUT_MS,
  );
}

/**
 * {@link CONTENDERS} new owners claim `key` at once, spread over `stores`: exactly one wins (answered with `takeover`),
 * and every other is answered the winner's live record with `attempts`. Resolves the winner.
 */
async function raceFor(
  stores: readonly IdempotencyStore[],
  key: string,
  { takeover, attempts }: { takeover: boolean; attempts: number },
): Promise<string> {
  const owners = Array.from({ length: CONTENDERS }, () => newOwner());
  const results = await Promise.all(owners.map((owner, i) => stores[i % stores.length].claim(claimOf(key, owner))));

  const winners = owners.filter((_owner, i) => results[i].claimed);
  expect(winners).toHaveLength(1);
  const [winner] = winners;
  expect(results[owners.indexOf(winner)]).toEqual({ claimed: true, takeover });
  for (const result of results.filter((r) => !r.claimed)) {
    expect(refusedClaim(result).record).toMatchObject({ state: 'in_progress', owner: winner, attempts });
  }
  return winner;
}
