import { randomUUID } from 'node:crypto';
import { expect, it } from '@jest/globals';
import type { ContractContext } from './contract-context.js';
import {
  LEASE_MS,
  SHORT_LEASE_MS,
  RETENTION_MS,
  ROUNDING_MS,
  SCOPE,
  newKey,
  newOwner,
  fingerprintOf,
  refOf,
  claimOf,
  refusedClaim,
  liveRecord,
  expectRetention,
  untilAbsent,
  largeUnicodeJson,
  EXPIRY_CASE_TIMEOUT_MS,
} from './contract-support.js';

/** What the owner of a claim may do with it, and nobody else: complete, fail, release, renew, hand over. */
export function ownershipCases<Transaction>(context: ContractContext<Transaction>): void {
  const { storeOf } = context;
  it('completes by the owner: stores the result verbatim, keeps the fingerprint, refuses later claims', async () => {
    const store = storeOf();
    const results = {
      large: largeUnicodeJson(),
      // Whitespace, key order and number spellings a JSON column type would normalise.
      formatted: '{ "z": 1.50, "a": [1e3, -0.0, "\\u00e9\\n"],\n  "é": { "🔑": null } }',
      null: 'null',
      emptyString: '""',
    };
    expect(results.large.length).toBeGreaterThanOrEqual(200_000);

    for (const [label, result] of Object.entries(results)) {
      const key = newKey(`complete-${label}`);
      const owner = newOwner();
      expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
      const claimed = await liveRecord(store, SCOPE, key);

      expect(await store.complete(refOf(key, owner), { result, ttlMs: RETENTION_MS })).toBe(true);

      const record = await liveRecord(store, SCOPE, key);
      expect(record).toEqual({
        ...claimed,
        state: 'completed',
        result,
        error: undefined,
        expiresAt: expect.any(Number),
      });
      expect(record.result === result).toBe(true); // exact, without a long diff on failure
      expectRetention(record, RETENTION_MS);

      const refused = refusedClaim(await store.claim(claimOf(key, newOwner())));
      expect(refused.record).toEqual(record);
      expect(refused.expiresInMs).toBeGreaterThan(RETENTION_MS - 60_000);
      expect(refused.expiresInMs).toBeLessThanOrEqual(RETENTION_MS);
      expect(await store.get(SCOPE, key)).toEqual(record);
    }
  });

  it('completes with an undefined result (a handler that returned nothing): the record has no result', async () => {
    const store = storeOf();
    const key = newKey('complete-undefined');
    const owner = newOwner();
    expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });

    expect(await store.complete(refOf(key, owner), { result: undefined, ttlMs: RETENTION_MS })).toBe(true);

    const record = await liveRecord(store, SCOPE, key);
    expect(record).toMatchObject({ state: 'completed', owner, fingerprint: fingerprintOf(key), attempts: 1 });
    expect(record.result).toBeUndefined();
    expect(record.error).toBeUndefined();
    const refused = refusedClaim(await store.claim(claimOf(key, newOwner())));
    expect(refused.record).toEqual(record);
    expect(refused.record.result).toBeUndefined();
  });

  it('fails by the owner: a failed record keeping the error text, refusing later claims', async () => {
    const store = storeOf();
    const key = newKey('fail');
    const owner = newOwner();
    expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
    const claimed = await liveRecord(store, SCOPE, key);
    const error = JSON.stringify({ name: 'PaymentDeclinedError', message: 'card declined ✗ — 残高不足 🙅\nline 2' });

    expect(await store.fail(refOf(key, owner), { error, ttlMs: RETENTION_MS })).toBe(true);

    const record = await liveRecord(store, SCOPE, key);
    expect(record).toEqual({
      ...claimed,
      state: 'failed',
      result: undefined,
      error,
      expiresAt: expect.any(Number),
    });
    expectRetention(record, RETENTION_MS);
    const refused = refusedClaim(await store.claim(claimOf(key, newOwner())));
    expect(refused.record).toEqual(record);
    expect(await store.get(SCOPE, key)).toEqual(record);
  });

  it('refuses complete, fail, renew and release by a non-owner and changes nothing', async () => {
    const store = storeOf();
    const key = newKey('non-owner');
    const owner = newOwner();
    expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
    const before = await liveRecord(store, SCOPE, key);
    const intruder = refOf(key, newOwner());

    expect(await store.complete(intruder, { result: '"stolen"', ttlMs: RETENTION_MS })).toBe(false);
    expect(await store.get(SCOPE, key)).toEqual(before);
    expect(await store.fail(intruder, { error: '{"name":"Error","message":"x"}', ttlMs: RETENTION_MS })).toBe(false);
    expect(await store.get(SCOPE, key)).toEqual(before);
    expect(await store.renew(intruder, LEASE_MS * 10)).toBe(false);
    expect(await store.get(SCOPE, key)).toEqual(before);
    expect(await store.release(intruder)).toBe(false);
    expect(await store.get(SCOPE, key)).toEqual(before);

    // The owner still holds it.
    expect(await store.complete(refOf(key, owner), { result: '"mine"', ttlMs: RETENTION_MS })).toBe(true);
    expect(await store.get(SCOPE, key)).toMatchObject({ state: 'completed', owner, result: '"mine"' });
  });

  it('refuses complete, fail, renew and release of an absent key and creates nothing', async () => {
    const store = storeOf();
    const key = newKey('absent-ops');
    const ref = refOf(key, newOwner());

    expect(await store.complete(ref, { result: '1', ttlMs: RETENTION_MS })).toBe(false);
    expect(await store.fail(ref, { error: '{"name":"Error","message":"x"}', ttlMs: RETENTION_MS })).toBe(false);
    expect(await store.renew(ref, LEASE_MS)).toBe(false);
    expect(await store.release(ref)).toBe(false);

    expect(await store.get(SCOPE, key)).toBeUndefined();
    expect(await store.claim(claimOf(key, newOwner()))).toEqual({ claimed: true, takeover: false });
  });

  it('refuses every change to a completed or failed record, by its owner or anyone else', async () => {
    const store = storeOf();
    for (const settle of ['complete', 'fail'] as const) {
      const key = newKey(`settled-${settle}`);
      const owner = newOwner();
      expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
      const settled =
        settle === 'complete'
          ? await store.complete(refOf(key, owner), { result: '{"ok":true}', ttlMs: RETENTION_MS })
          : await store.fail(refOf(key, owner), { error: '{"name":"Error","message":"no"}', ttlMs: RETENTION_MS });
      expect(settled).toBe(true);
      const before = await liveRecord(store, SCOPE, key);

      for (const ref of [refOf(key, owner), refOf(key, newOwner())]) {
        expect(await store.complete(ref, { result: '"again"', ttlMs: RETENTION_MS })).toBe(false);
        expect(await store.fail(ref, { error: '{"name":"Error","message":"again"}', ttlMs: RETENTION_MS })).toBe(false);
        expect(await store.renew(ref, LEASE_MS)).toBe(false);
        expect(await store.release(ref)).toBe(false);
        expect(await store.get(SCOPE, key)).toEqual(before);
      }
    }
  });

  it('releases by the owner: the key is absent and the next claim is a fresh one', async () => {
    const store = storeOf();
    const key = newKey('release');
    const owner = newOwner();
    expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });

    expect(await store.release(refOf(key, owner))).toBe(true);
    expect(await store.get(SCOPE, key)).toBeUndefined();

    const next = newOwner();
    expect(await store.claim(claimOf(key, next, { fingerprint: undefined, jobId: undefined }))).toEqual({
      claimed: true,
      takeover: false,
    });
    const record = await liveRecord(store, SCOPE, key);
    expect(record).toMatchObject({ state: 'in_progress', owner: next, attempts: 1 });
    expect(record.fingerprint).toBeUndefined();
    expect(record.jobId).toBeUndefined();
    // The old owner's token no longer works.
    expect(await store.release(refOf(key, owner))).toBe(false);
    expect(await store.get(SCOPE, key)).toEqual(record);
  });

  it('renews by the owner: moves the lease end forward; after completing, renew is refused', async () => {
    const store = storeOf();
    const key = newKey('renew');
    const owner = newOwner();
    expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
    const claimed = await liveRecord(store, SCOPE, key);

    expect(await store.renew(refOf(key, owner), LEASE_MS * 2)).toBe(true);

    const renewed = await liveRecord(store, SCOPE, key);
    expect(renewed).toEqual({ ...claimed, expiresAt: expect.any(Number) });
    // Renewed at or after the claim, for twice the lease.
    expect(renewed.expiresAt - claimed.expiresAt).toBeGreaterThanOrEqual(LEASE_MS - ROUNDING_MS);
    const refused = refusedClaim(await store.claim(claimOf(key, newOwner())));
    expect(refused.expiresInMs).toBeGreaterThan(LEASE_MS);
    expect(refused.expiresInMs).toBeLessThanOrEqual(LEASE_MS * 2);

    expect(await store.complete(refOf(key, owner), { result: '7', ttlMs: RETENTION_MS })).toBe(true);
    const completed = await liveRecord(store, SCOPE, key);
    expect(await store.renew(refOf(key, owner), LEASE_MS)).toBe(false);
    expect(await store.get(SCOPE, key)).toEqual(completed);
  });

  it('hands a claim over to a resume token: live for others, taken over by that token, fingerprint kept', async () => {
    const store = storeOf();
    if (!store.handOver) return; // optional: a store without it releases instead (the runner's fallback)
    const key = newKey('hand-over');
    const owner = newOwner();
    const resumeOwner = `step:${randomUUID()}`;
    expect(await store.claim(claimOf(key, owner, { fingerprint: 'fp-sent', resumeOwner }))).toEqual({
      claimed: true,
      takeover: false,
    });
    // Only the owner hands over; a stranger's token changes nothing.
    expect(await store.handOver(refOf(key, newOwner()), { owner: resumeOwner, leaseMs: LEASE_MS * 2 })).toBe(false);
    expect(await store.handOver(refOf(key, owner), { owner: resumeOwner, leaseMs: LEASE_MS * 2 })).toBe(true);
    const parked = await liveRecord(store, SCOPE, key);
    expect(parked).toMatchObject({ state: 'in_progress', owner: resumeOwner, fingerprint: 'fp-sent', attempts: 1 });
    // The old owner lost it: no renewal, completion or release.
    expect(await store.renew(refOf(key, owner), LEASE_MS)).toBe(false);
    expect(await store.complete(refOf(key, owner), { result: '1', ttlMs: RETENTION_MS })).toBe(false);
    expect(await store.release(refOf(key, owner))).toBe(false);

    // Another job's claim (same payload, another resume token or none) meets it live, for the handed-over lease.
    const other = refusedClaim(await store.claim(claimOf(key, newOwner(), { fingerprint: 'fp-sent' })));
    expect(other.record).toMatchObject({ state: 'in_progress', owner: resumeOwner });
    expect(other.expiresInMs).toBeGreaterThan(LEASE_MS);
    refusedClaim(await store.claim(claimOf(key, newOwner(), { resumeOwner: `step:${randomUUID()}` })));

    // The job's next delivery (its data changed by the step: another fingerprint) takes it over, keeping the first.
    const resumed = newOwner();
    // A store that hands over answers `resumed` (the runner then hands a retried failure of it over as well).
    expect(await store.claim(claimOf(key, resumed, { fingerprint: 'fp-updated', resumeOwner }))).toEqual({
      claimed: true,
      takeover: true,
      resumed: true,
    });
    expect(await liveRecord(store, SCOPE, key)).toMatchObject({
      state: 'in_progress',
      owner: resumed,
      fingerprint: 'fp-sent',
      attempts: 2,
    });
    expect(await store.complete(refOf(key, resumed), { result: '"done"', ttlMs: RETENTION_MS })).toBe(true);
    // Settled: the resume token takes nothing any more.
    refusedClaim(await store.claim(claimOf(key, newOwner(), { fingerprint: 'fp-sent', resumeOwner })));
    expect(await liveRecord(store, SCOPE, key)).toMatchObject({ state: 'completed', result: '"done"' });
  });

  it(
    'keeps a later step a later step when its worker dies: the same job’s takeover still answers resumed',
    async () => {
      const store = storeOf();
      if (!store.handOver) return; // optional, as above
      const key = newKey('resumed-takeover');
      const resumeOwner = `step:${randomUUID()}`;
      // One job (the same id, Redis key and creation time at each delivery); another job of the same key and payload.
      const job = { jobId: 'job-stepping', jobKey: `bull:q:${randomUUID()}`, jobCreatedAt: 1_700_000_000_000 };
      const first = newOwner();
      expect(await store.claim(claimOf(key, first, { ...job, resumeOwner }))).toEqual({
        claimed: true,
        takeover: false,
      });
      expect(await store.handOver(refOf(key, first), { owner: resumeOwner, leaseMs: LEASE_MS })).toBe(true);
      // The next step resumes it for a short lease, and its worker dies mid-step.
      const died = newOwner();
      expect(await store.claim(claimOf(key, died, { ...job, resumeOwner, leaseMs: SHORT_LEASE_MS }))).toEqual({
        claimed: true,
        takeover: true,
        resumed: true,
      });
      await untilAbsent(store, key);
      // BullMQ delivers the job again at that step: its takeover is a later step still (a retried failure of it must
      // hand the claim over again, not release it for a duplicate to run the first step), and a takeover (its handler
      // may find the step's effect partly done), not a resume.
      const again = newOwner();
      expect(await store.claim(claimOf(key, again, { ...job, resumeOwner, leaseMs: SHORT_LEASE_MS }))).toEqual({
        claimed: true,
        takeover: true,
        laterStep: true,
      });
      expect(await liveRecord(store, SCOPE, key)).toMatchObject({ owner: again, attempts: 3, result: undefined });
      await untilAbsent(store, key);
      // Another job taking the ended claim over (same payload) runs from its first step: no later step.
      expect(await store.claim(claimOf(key, newOwner(), { resumeOwner: `step:${randomUUID()}` }))).toEqual({
        claimed: true,
        takeover: true,
      });
    },
    EXPIRY_CASE_TIMEOUT_MS,
  );
}
