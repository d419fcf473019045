import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { IdempotencyLeaseLostError } from '../../errors/idempotency-lease-lost.error.js';
import type { IdempotencyCompletion, IdempotencyRecordRef } from '../../idempotency/idempotency-store.interface.js';
import type { ContractContext } from './contract-context.js';
import {
  LEASE_MS,
  SHORT_LEASE_MS,
  RETENTION_MS,
  SCOPE,
  newKey,
  newOwner,
  refOf,
  claimOf,
  refusedClaim,
  liveRecord,
  expectRetention,
  untilAbsent,
  EXPIRY_CASE_TIMEOUT_MS,
} from './contract-support.js';

/** `runInTransaction`: the handler’s writes and the record commit or roll back together. */
export function runInTransactionCases<Transaction>(context: ContractContext<Transaction>): void {
  const { name, setup, current } = context;
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

    it(
      'rejects with IdempotencyLeaseLostError and rolls back when the claim was taken over',
      async () => {
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
      },
      EXPIRY_CASE_TIMEOUT_MS,
    );

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
}
