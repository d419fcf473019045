/**
 * The contract test suite every {@link IdempotencyStore} must pass: the Redis, PostgreSQL and SQLite stores run it, and
 * so should a store of your own.
 *
 * It needs only Jest (`@jest/globals`) and the library's store types and `IdempotencyLeaseLostError`: in your own
 * project, copy this file and import those from `'nestjs-unique-jobs'` instead of the relative `lib/` paths below.
 *
 * Usage, in a Jest spec file:
 *
 * ```ts
 * import { describeIdempotencyStoreContract } from './store-contract.js';
 *
 * describeIdempotencyStoreContract('my-store', {
 *   transactional: true, // whether the store implements `runInTransaction`
 *   async create() {
 *     // Called once, in `beforeAll`. Give every run its own namespace (key prefix, table, file).
 *     const store = new MyStore(connectionA);
 *     await store.migrate();
 *     return {
 *       store,
 *       // Optional: more instances of the same store on the same data, each with its own connection(s). The
 *       // concurrency cases spread their claims over `store` and these, so races cross connections.
 *       peers: [new MyStore(connectionB), new MyStore(connectionC)],
 *       // Required when `transactional`: writes a row to a table of the caller's own through the transaction handle
 *       // that `runInTransaction` passes to `work`, and counts committed rows (outside any transaction), so the suite
 *       // can check that handler writes commit and roll back together with the record.
 *       probe: {
 *         write: async (tx, marker) => void (await tx.query('INSERT INTO probe (marker) VALUES ($1)', [marker])),
 *         count: async (marker) => (await pool.query('SELECT ... WHERE marker = $1', [marker])).rows[0].n,
 *       },
 *       // Called once, in `afterAll`: drop what the run created and close the connections.
 *       cleanup: async () => { ... },
 *     };
 *   },
 * });
 * ```
 *
 * What it checks, following the TSDoc of `IdempotencyStore` (the spec): claim semantics (fresh, refused, concurrent,
 * takeover after a lease ends), complete/fail/renew/release as compare-and-set operations on the owner token, verbatim
 * storage of results (large and unicode JSON text) and errors, lease and retention expiry, isolation of scopes, keys
 * that hold any characters, get/delete, and, for transactional stores, that the handler's writes and the completed
 * record commit together or not at all. Every case asserts both what the store answers and what `get` reads back.
 *
 * Times: a store may use its own clock (a database server's). The suite never compares a store's absolute times with
 * the test's clock beyond a generous bound; it compares a record's `expiresAt` with the `expiresInMs` the store answers
 * to a refused claim. Expiry is awaited by polling `get` (no fixed sleeps), with leases of a few hundred milliseconds.
 * The cases use random keys in one scope, so they do not depend on one another's leftovers.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { IdempotencyLeaseLostError } from '../../lib/errors/idempotency-lease-lost.error.js';
import type {
  IdempotencyClaim,
  IdempotencyClaimResult,
  IdempotencyCompletion,
  IdempotencyRecord,
  IdempotencyRecordRef,
  IdempotencyStore,
  TransactionClaim,
} from '../../lib/idempotency/idempotency-store.interface.js';

/** Writes and counts rows of the caller's own table, to observe commit and rollback of a handler's writes. */
export interface TransactionProbe<Transaction> {
  /** Inserts one row holding `marker` through the transaction handle `runInTransaction` gave the handler. */
  write(transaction: Transaction, marker: string): Promise<void>;
  /** The number of committed rows holding `marker`, read outside any transaction. */
  count(marker: string): Promise<number>;
}

/** What {@link ContractSetup.create} provides to the suite. */
export interface ContractFixture<Transaction> {
  /** The store under test. */
  store: IdempotencyStore<Transaction>;
  /**
   * More instances of the same store on the same data, each with its own connection(s) (optional). The concurrency
   * cases spread their claims over {@link store} and these.
   */
  peers?: readonly IdempotencyStore<Transaction>[];
  /** Required when the store is transactional: see {@link TransactionProbe}. */
  probe?: TransactionProbe<Transaction>;
  /** Removes what the run created (keys, tables, files) and closes connections; called in `afterAll`. */
  cleanup(): Promise<void>;
}

/** How the suite gets its store(s). */
export interface ContractSetup<Transaction = unknown> {
  /**
   * Whether the store implements `runInTransaction`. Declared up front because Jest defines the cases before
   * `beforeAll` creates the store; the suite checks that the store agrees.
   */
  transactional: boolean;
  /** Creates the store(s); called once, in `beforeAll`. */
  create(): Promise<ContractFixture<Transaction>>;
}

/** The lease of claims that must not expire during a case. */
const LEASE_MS = 60_000;
/** The lease of claims a case waits to see expire. */
const SHORT_LEASE_MS = 1_000;
/** The retention of completed or failed records that must not expire during a case. */
const RETENTION_MS = 3_600_000;
/** The retention of records a case waits to see expire. */
const SHORT_RETENTION_MS = 1_000;
/** Rounding between a store's times (e.g. microseconds on a database server) and milliseconds. */
const ROUNDING_MS = 5;
/** How far a store's clock may be from the test's (a database on another host). */
const CLOCK_SKEW_MS = 10 * 60_000;
/** How long the suite waits for a lease or retention to end. */
const EXPIRY_TIMEOUT_MS = 15_000;
/** The number of concurrent claimants of the race cases. */
const CONTENDERS = 50;

const SCOPE = 'contract';

/**
 * Defines the contract suite (one `describe` named after the store) for the store(s) `setup` creates.
 *
 * @param name Names the store in test titles.
 * @param setup Creates the store(s) in `beforeAll` and says whether it is transactional.
 */
export function describeIdempotencyStoreContract<Transaction>(name: string, setup: ContractSetup<Transaction>): void {
  describe(`idempotency store contract: ${name}`, () => {
    let fixture: ContractFixture<Transaction> | undefined;

    beforeAll(async () => {
      fixture = await setup.create();
    });

    afterAll(async () => {
      await fixture?.cleanup();
    });

    const current = (): ContractFixture<Transaction> => {
      if (!fixture) throw new Error(`the ${name} store was not created (see the beforeAll error)`);
      return fixture;
    };
    const storeOf = (): IdempotencyStore<Transaction> => current().store;
    const contenders = (): IdempotencyStore<Transaction>[] => [current().store, ...(current().peers ?? [])];

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
        const owners = Array.from({ length: CONTENDERS }, () => newOwner());
        const results = await Promise.all(
          owners.map((owner, i) => stores[i % stores.length].claim(claimOf(key, owner))),
        );

        const winners = owners.filter((_owner, i) => results[i].claimed);
        expect(winners).toHaveLength(1);
        const [winner] = winners;
        expect(results[owners.indexOf(winner)]).toEqual({ claimed: true, takeover: false });
        for (const result of results.filter((r) => !r.claimed)) {
          expect(refusedClaim(result).record).toMatchObject({ state: 'in_progress', owner: winner, attempts: 1 });
        }
        expect(await storeOf().get(SCOPE, key)).toMatchObject({
          state: 'in_progress',
          owner: winner,
          jobId: jobOf(winner),
          attempts: 1,
        });
      }
    });

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
          expect(await store.fail(ref, { error: '{"name":"Error","message":"again"}', ttlMs: RETENTION_MS })).toBe(
            false,
          );
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

    it('keeps a later step a later step when its worker dies: the same job’s takeover still answers resumed', async () => {
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
    });

    it('does not let a different payload take over an ended claim: it answers the record, for a mismatch', async () => {
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
    });

    it('treats an in_progress record whose lease ended as absent; the next claim takes it over', async () => {
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
    });

    it(`lets exactly one of ${CONTENDERS} concurrent claimants take over an ended lease`, async () => {
      const stores = contenders();
      const store = storeOf();
      const key = newKey('takeover-race');
      expect(await store.claim(claimOf(key, newOwner(), { leaseMs: SHORT_LEASE_MS }))).toEqual({
        claimed: true,
        takeover: false,
      });
      await untilAbsent(store, key);

      const owners = Array.from({ length: CONTENDERS }, () => newOwner());
      const results = await Promise.all(owners.map((owner, i) => stores[i % stores.length].claim(claimOf(key, owner))));

      const winners = owners.filter((_owner, i) => results[i].claimed);
      expect(winners).toHaveLength(1);
      const [winner] = winners;
      expect(results[owners.indexOf(winner)]).toEqual({ claimed: true, takeover: true });
      for (const result of results.filter((r) => !r.claimed)) {
        expect(refusedClaim(result).record).toMatchObject({ state: 'in_progress', owner: winner, attempts: 2 });
      }
      expect(await store.get(SCOPE, key)).toMatchObject({ state: 'in_progress', owner: winner, attempts: 2 });
    });

    it('treats a completed or failed record whose retention ended as absent; the next claim is a fresh one', async () => {
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
    });

    it('isolates scopes, and keys and scopes round-trip exactly whatever characters they hold', async () => {
      const store = storeOf();
      const id = randomUUID();
      // The same key in two scopes, and pairs whose naive concatenation would collide.
      const pairs: [scope: string, key: string][] = [
        [`scope-a-${id}`, 'shared-key'],
        [`scope-b-${id}`, 'shared-key'],
        [`s:${id}`, 'x:y'],
        [`s:${id}:x`, 'y'],
      ];
      const weird = [
        `evt_{secret}*-${id}`,
        `{${id}}`,
        `star*?[a-z]-${id}`,
        `line1\nline2\r\n\t-${id}`,
        `unicode-é-鍵-🔑-\u200d-${id}`,
        `'"\\;--%_-${id}`,
        ` leading and trailing spaces ${id} `,
        codePoints(300, id),
      ];
      for (const key of weird) pairs.push([`weird-${id}`, key]);
      pairs.push([`scope with spaces, * { } \n and 🔭 ${id}`, 'k']);
      expect(Array.from(codePoints(300, id))).toHaveLength(300);

      const owners = pairs.map(() => newOwner());
      for (const [i, [scope, key]] of pairs.entries()) {
        expect(await store.claim({ ...claimOf(key, owners[i]), scope })).toEqual({ claimed: true, takeover: false });
      }
      for (const [i, [scope, key]] of pairs.entries()) {
        const record = await liveRecord(store, scope, key);
        expect(record).toMatchObject({ state: 'in_progress', owner: owners[i], attempts: 1 });
        expect(record.scope === scope && record.key === key).toBe(true);
        expect({ scope: record.scope, key: record.key }).toEqual({ scope, key });
      }
      for (const [i, [scope, key]] of pairs.entries()) {
        const result = JSON.stringify({ scope, key });
        expect(await store.complete({ scope, key, owner: owners[i] }, { result, ttlMs: RETENTION_MS })).toBe(true);
        const refused = refusedClaim(await store.claim({ ...claimOf(key, newOwner()), scope }));
        expect(refused.record).toMatchObject({ scope, key, state: 'completed', owner: owners[i], result });
      }
      for (const [i, [scope, key]] of pairs.entries()) {
        expect(await store.get(scope, key)).toMatchObject({
          scope,
          key,
          owner: owners[i],
          result: JSON.stringify({ scope, key }),
        });
      }
      // A scope or key that was never used is still absent.
      expect(await store.get(`scope-c-${id}`, 'shared-key')).toBeUndefined();
      expect(await store.get(`weird-${id}`, `evt_{secret}-${id}`)).toBeUndefined();
    });

    it('get answers undefined for an absent key; delete removes a record whatever its state', async () => {
      const store = storeOf();
      const absent = newKey('absent');
      expect(await store.get(SCOPE, absent)).toBeUndefined();
      expect(await store.delete(SCOPE, absent)).toBe(false);

      const inProgress = newKey('delete-in-progress');
      expect(await store.claim(claimOf(inProgress, newOwner()))).toEqual({ claimed: true, takeover: false });
      const completed = newKey('delete-completed');
      const owner = newOwner();
      expect(await store.claim(claimOf(completed, owner))).toEqual({ claimed: true, takeover: false });
      expect(await store.complete(refOf(completed, owner), { result: '1', ttlMs: RETENTION_MS })).toBe(true);
      const failed = newKey('delete-failed');
      const loser = newOwner();
      expect(await store.claim(claimOf(failed, loser))).toEqual({ claimed: true, takeover: false });
      expect(await store.fail(refOf(failed, loser), { error: '{"name":"E","message":"m"}', ttlMs: RETENTION_MS })).toBe(
        true,
      );

      for (const key of [inProgress, completed, failed]) {
        expect(await store.get(SCOPE, key)).toBeDefined();
        expect(await store.delete(SCOPE, key)).toBe(true);
        expect(await store.get(SCOPE, key)).toBeUndefined();
        expect(await store.delete(SCOPE, key)).toBe(false);
        // Deleted means absent: the next claim is fresh.
        expect(await store.claim(claimOf(key, newOwner()))).toEqual({ claimed: true, takeover: false });
        expect(await store.get(SCOPE, key)).toMatchObject({ state: 'in_progress', attempts: 1 });
      }
    });

    if (!setup.transactional) return;

    describe('runInTransaction', () => {
      const transactional = () => {
        const { store, probe } = current();
        if (!store.runInTransaction || !probe) throw new Error(`${name}: no runInTransaction, or no probe given`);
        const run = <T>(
          ref: IdempotencyRecordRef,
          work: (transaction: Transaction) => Promise<T>,
          completion: (value: T) => IdempotencyCompletion,
        ): Promise<T> => store.runInTransaction!(ref, work, completion);
        return { store, probe, run };
      };

      it('hands the record over in the transaction (a step of a step job): writes commit, the job resumes it', async () => {
        const { store, probe, run } = transactional();
        if (!store.handsOverInTransaction) return; // optional: such a step rolls back instead
        const key = newKey('tx-hand-over');
        const owner = newOwner();
        const resumeOwner = `step:${randomUUID()}`;
        expect(await store.claim(claimOf(key, owner, { resumeOwner }))).toEqual({ claimed: true, takeover: false });
        const marker = randomUUID();
        await run(
          refOf(key, owner),
          (transaction) => probe.write(transaction, marker),
          () => ({ result: undefined, ttlMs: RETENTION_MS, handover: { owner: resumeOwner, leaseMs: LEASE_MS * 4 } }),
        );
        expect(await probe.count(marker)).toBe(1);
        expect(await liveRecord(store, SCOPE, key)).toMatchObject({ state: 'in_progress', owner: resumeOwner });
        expect(refusedClaim(await store.claim(claimOf(key, newOwner()))).expiresInMs).toBeGreaterThan(LEASE_MS);
        const resumed = newOwner();
        expect(await store.claim(claimOf(key, resumed, { resumeOwner }))).toEqual({
          claimed: true,
          takeover: true,
          resumed: true,
        });
        expect(await liveRecord(store, SCOPE, key)).toMatchObject({
          state: 'in_progress',
          owner: resumed,
          attempts: 2,
        });
      });

      it('commits the handler’s writes and the completed record together, and returns the value', async () => {
        const { store, probe, run } = transactional();
        const key = newKey('tx-commit');
        const owner = newOwner();
        expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
        const claimed = await liveRecord(store, SCOPE, key);
        const marker = randomUUID();
        const value = { charged: 4200, currency: 'EUR', note: 'ünïcödé 🧾' };

        const returned = await run(
          refOf(key, owner),
          async (transaction) => {
            await probe.write(transaction, marker);
            return value;
          },
          (result) => ({ result: JSON.stringify(result), ttlMs: RETENTION_MS }),
        );

        expect(returned).toBe(value);
        expect(await probe.count(marker)).toBe(1);
        const record = await liveRecord(store, SCOPE, key);
        expect(record).toEqual({
          ...claimed,
          state: 'completed',
          result: JSON.stringify(value),
          error: undefined,
          expiresAt: expect.any(Number),
        });
        expectRetention(record, RETENTION_MS);

        // A handler that returns nothing: the record has no result.
        const quiet = newKey('tx-undefined');
        const quietOwner = newOwner();
        expect(await store.claim(claimOf(quiet, quietOwner))).toEqual({ claimed: true, takeover: false });
        const quietMarker = randomUUID();
        const nothing = await run(
          refOf(quiet, quietOwner),
          (transaction) => probe.write(transaction, quietMarker),
          () => ({ result: undefined, ttlMs: RETENTION_MS }),
        );
        expect(nothing).toBeUndefined();
        expect(await probe.count(quietMarker)).toBe(1);
        const quietRecord = await liveRecord(store, SCOPE, quiet);
        expect(quietRecord).toMatchObject({ state: 'completed', owner: quietOwner });
        expect(quietRecord.result).toBeUndefined();
      });

      it('rolls the handler’s writes back when work throws; the record stays in_progress for the owner', async () => {
        const { store, probe, run } = transactional();
        const key = newKey('tx-work-throws');
        const owner = newOwner();
        expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
        const before = await liveRecord(store, SCOPE, key);
        const marker = randomUUID();
        const failure = new Error('the handler failed');

        await expect(
          run(
            refOf(key, owner),
            async (transaction): Promise<string> => {
              await probe.write(transaction, marker);
              throw failure;
            },
            (result) => ({ result, ttlMs: RETENTION_MS }),
          ),
        ).rejects.toBe(failure);

        expect(await probe.count(marker)).toBe(0);
        expect(await store.get(SCOPE, key)).toEqual(before);
        // Still the owner's: it can settle it.
        expect(await store.release(refOf(key, owner))).toBe(true);
      });

      it('rolls the handler’s writes back when completion throws; the record stays in_progress', async () => {
        const { store, probe, run } = transactional();
        const key = newKey('tx-completion-throws');
        const owner = newOwner();
        expect(await store.claim(claimOf(key, owner))).toEqual({ claimed: true, takeover: false });
        const before = await liveRecord(store, SCOPE, key);
        const marker = randomUUID();
        const failure = new TypeError('Do not know how to serialize a BigInt');

        await expect(
          run(
            refOf(key, owner),
            async (transaction) => {
              await probe.write(transaction, marker);
              return 1n;
            },
            () => {
              throw failure;
            },
          ),
        ).rejects.toBe(failure);

        expect(await probe.count(marker)).toBe(0);
        expect(await store.get(SCOPE, key)).toEqual(before);
        expect(await store.complete(refOf(key, owner), { result: '"later"', ttlMs: RETENTION_MS })).toBe(true);
      });

      it('rejects with IdempotencyLeaseLostError and rolls back when the claim was taken over', async () => {
        const { store, probe, run } = transactional();
        const key = newKey('tx-lease-lost');
        const stalled = newOwner();
        expect(await store.claim(claimOf(key, stalled, { leaseMs: SHORT_LEASE_MS }))).toEqual({
          claimed: true,
          takeover: false,
        });
        await untilAbsent(store, key);
        const next = newOwner();
        expect(await store.claim(claimOf(key, next))).toEqual({ claimed: true, takeover: true });
        const taken = await liveRecord(store, SCOPE, key);
        const marker = randomUUID();

        const outcome = run(
          refOf(key, stalled),
          async (transaction) => {
            await probe.write(transaction, marker);
            return 'late';
          },
          (result) => ({ result: JSON.stringify(result), ttlMs: RETENTION_MS }),
        );
        await expect(outcome).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
        await expect(outcome).rejects.toMatchObject({ scope: SCOPE, key });

        expect(await probe.count(marker)).toBe(0);
        expect(await store.get(SCOPE, key)).toEqual(taken);
      });

      it('rejects with IdempotencyLeaseLostError for a key the owner never claimed, writing nothing', async () => {
        const { store, probe, run } = transactional();
        const key = newKey('tx-never-claimed');
        const marker = randomUUID();

        await expect(
          run(
            refOf(key, newOwner()),
            async (transaction) => {
              await probe.write(transaction, marker);
              return 1;
            },
            (result) => ({ result: String(result), ttlMs: RETENTION_MS }),
          ),
        ).rejects.toBeInstanceOf(IdempotencyLeaseLostError);

        expect(await probe.count(marker)).toBe(0);
        expect(await store.get(SCOPE, key)).toBeUndefined();
      });
    });

    // Every transactional store of the package has it (SQLite: a claim, then runInTransaction).
    if (setup.transactional) describeClaimInTransaction();
    function describeClaimInTransaction(): void {
      describe('claimInTransaction', () => {
        const inTransaction = () => {
          const { store, probe } = current();
          if (!store.claimInTransaction || !probe) throw new Error(`${name}: no claimInTransaction, or no probe given`);
          return { store, probe, claimIn: store.claimInTransaction.bind(store) };
        };
        const requestOf = (key: string, owner: string) => ({ ...claimOf(key, owner), ttlMs: RETENTION_MS });

        it('claims, runs the work with { takeover: false }, and commits its writes with the completed record', async () => {
          const t = inTransaction();
          const key = newKey('cit-commit');
          const owner = newOwner();
          const marker = randomUUID();
          const seen: TransactionClaim[] = [];
          const answer = await t.claimIn(
            requestOf(key, owner),
            async (transaction, claim) => {
              seen.push(claim);
              await t.probe.write(transaction, marker);
              return { charged: 4200 };
            },
            (value) => ({ result: JSON.stringify(value), ttlMs: RETENTION_MS }),
          );
          expect(answer).toEqual({ claimed: true, value: { charged: 4200 } });
          expect(seen).toEqual([expect.objectContaining({ takeover: false })]);
          expect(await t.probe.count(marker)).toBe(1);
          const record = await liveRecord(t.store, SCOPE, key);
          expect(record).toMatchObject({
            state: 'completed',
            owner,
            jobId: jobOf(owner),
            fingerprint: fingerprintOf(key),
            result: '{"charged":4200}',
            attempts: 1,
          });
          expectRetention(record, RETENTION_MS);

          // Settled: a later claim, in a transaction or not, answers it and runs nothing.
          let ran = false;
          const again = await t.claimIn(
            requestOf(key, newOwner()),
            async () => {
              ran = true;
            },
            () => ({ result: undefined, ttlMs: RETENTION_MS }),
          );
          expect(again).toMatchObject({ claimed: false, record: { state: 'completed', owner } });
          expect(ran).toBe(false);
          expect(refusedClaim(await t.store.claim(claimOf(key, newOwner()))).record).toMatchObject({ owner });
        });

        it('hands the record over in the claim’s transaction; the job’s next claim in a transaction resumes it', async () => {
          const t = inTransaction();
          if (!t.store.handsOverInTransaction) return;
          const key = newKey('cit-hand-over');
          const resumeOwner = `step:${randomUUID()}`;
          const marker = randomUUID();
          const handover = { owner: resumeOwner, leaseMs: LEASE_MS * 4 };
          const first = await t.claimIn(
            { ...requestOf(key, newOwner()), resumeOwner },
            (transaction) => t.probe.write(transaction, marker),
            () => ({ result: undefined, ttlMs: RETENTION_MS, handover }),
          );
          expect(first).toEqual({ claimed: true, value: undefined });
          expect(await t.probe.count(marker)).toBe(1);
          expect(await liveRecord(t.store, SCOPE, key)).toMatchObject({ state: 'in_progress', owner: resumeOwner });

          // Another job's claim in a transaction meets it live and runs nothing.
          let ran = false;
          const other = await t.claimIn(
            requestOf(key, newOwner()),
            async () => {
              ran = true;
            },
            () => ({ result: undefined, ttlMs: RETENTION_MS }),
          );
          expect(other).toMatchObject({ claimed: false, record: { state: 'in_progress', owner: resumeOwner } });
          expect(ran).toBe(false);

          // The job's next delivery resumes it (a takeover) and completes.
          const seen: TransactionClaim[] = [];
          const resumed = newOwner();
          const second = await t.claimIn(
            { ...requestOf(key, resumed), resumeOwner },
            async (transaction, claim) => {
              seen.push(claim);
              await t.probe.write(transaction, marker);
              return 'done';
            },
            (value) => ({ result: JSON.stringify(value), ttlMs: RETENTION_MS }),
          );
          expect(second).toEqual({ claimed: true, value: 'done' });
          expect(seen).toEqual([expect.objectContaining({ takeover: true })]);
          expect(await t.probe.count(marker)).toBe(2);
          expect(await liveRecord(t.store, SCOPE, key)).toMatchObject({
            state: 'completed',
            owner: resumed,
            result: '"done"',
            attempts: 2,
          });
        });

        it('rolls everything back when the work throws; release answers true, then the key is claimed afresh', async () => {
          const t = inTransaction();
          const key = newKey('cit-throws');
          const owner = newOwner();
          const marker = randomUUID();
          const failure = new Error('the handler failed');
          await expect(
            t.claimIn(
              requestOf(key, owner),
              async (transaction) => {
                await t.probe.write(transaction, marker);
                throw failure;
              },
              () => ({ result: undefined, ttlMs: RETENTION_MS }),
            ),
          ).rejects.toBe(failure);
          expect(await t.probe.count(marker)).toBe(0);
          expect(await t.store.release(refOf(key, owner))).toBe(true);
          expect(await t.store.get(SCOPE, key)).toBeUndefined();
          expect(await t.store.claim(claimOf(key, newOwner()))).toEqual({ claimed: true, takeover: false });
        });

        it('keeps a failure after the work threw: fail writes the failed record with the claim’s fingerprint', async () => {
          const t = inTransaction();
          const key = newKey('cit-fail');
          const owner = newOwner();
          const failure = new Error('final failure');
          await expect(
            t.claimIn(
              requestOf(key, owner),
              () => Promise.reject(failure),
              () => ({ result: undefined, ttlMs: RETENTION_MS }),
            ),
          ).rejects.toBe(failure);
          const error = JSON.stringify({ name: 'Error', message: 'final failure' });
          expect(await t.store.fail(refOf(key, owner), { error, ttlMs: RETENTION_MS })).toBe(true);
          expect(await liveRecord(t.store, SCOPE, key)).toMatchObject({
            state: 'failed',
            owner,
            error,
            fingerprint: fingerprintOf(key),
          });
          // Once only: a second fail of the same attempt changes nothing.
          expect(await t.store.fail(refOf(key, owner), { error, ttlMs: RETENTION_MS })).toBe(false);
        });
      });
    }
  });
}

function newKey(label: string): string {
  return `${label}-${randomUUID()}`;
}

function newOwner(): string {
  return `owner-${randomUUID()}`;
}

function jobOf(owner: string): string {
  return `job-of-${owner}`;
}

function fingerprintOf(key: string): string {
  return `fingerprint-of-${key}`;
}

function refOf(key: string, owner: string): IdempotencyRecordRef {
  return { scope: SCOPE, key, owner };
}

function claimOf(key: string, owner: string, overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim {
  return {
    scope: SCOPE,
    key,
    owner,
    leaseMs: LEASE_MS,
    fingerprint: fingerprintOf(key),
    jobId: jobOf(owner),
    ...overrides,
  };
}

/** The answer to a claim that must have been refused. */
function refusedClaim(result: IdempotencyClaimResult): Extract<IdempotencyClaimResult, { claimed: false }> {
  expect(result).toMatchObject({ claimed: false });
  if (result.claimed) throw new Error('the claim was expected to be refused');
  return result;
}

/** The live record of a key, which must exist. */
async function liveRecord<Transaction>(
  store: IdempotencyStore<Transaction>,
  scope: string,
  key: string,
): Promise<IdempotencyRecord> {
  const record = await store.get(scope, key);
  if (!record)
    throw new Error(`expected a live record for key ${JSON.stringify(key)} (scope ${JSON.stringify(scope)})`);
  return record;
}

/** A settled record is kept `ttlMs` from when it was settled (at or after its claim). */
function expectRetention(record: IdempotencyRecord, ttlMs: number): void {
  expect(record.expiresAt - record.createdAt).toBeGreaterThanOrEqual(ttlMs - ROUNDING_MS);
  expect(record.expiresAt - record.createdAt).toBeLessThanOrEqual(ttlMs + 60_000);
}

/** Polls `get` until the key has no live record (a lease or retention ended). */
async function untilAbsent<Transaction>(store: IdempotencyStore<Transaction>, key: string): Promise<void> {
  const deadline = Date.now() + EXPIRY_TIMEOUT_MS;
  while ((await store.get(SCOPE, key)) !== undefined) {
    if (Date.now() > deadline) throw new Error(`key ${key} was still live after ${EXPIRY_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** `length` code points: ASCII, accented, CJK, astral (surrogate pairs) and glob/hash-tag characters, then `id`. */
function codePoints(length: number, id: string): string {
  const alphabet = ['a', 'é', '鍵', '🔑', '*', '{', '}', '\n', ' ', 'Z'];
  const tail = Array.from(`-${id}`);
  const head = Array.from({ length: length - tail.length }, (_, i) => alphabet[i % alphabet.length]);
  return [...head, ...tail].join('');
}

/** About 200 KB of JSON text with unicode (BMP, astral, combining), escapes and nesting. */
function largeUnicodeJson(): string {
  const items = Array.from({ length: 1_500 }, (_, i) => ({
    i,
    name: `条目 ${i} — ünïcödé ✓ 🚀 e\u0301 ${'ß'.repeat(i % 7)}`,
    escapes: 'quote " backslash \\ tab \t newline \n nul \u0000 lone \ud800 end',
    amount: i * 1.25,
    flags: [true, false, null],
  }));
  return JSON.stringify({ items, total: items.length });
}
