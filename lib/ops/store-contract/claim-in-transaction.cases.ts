import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { TransactionClaim } from '../../idempotency/idempotency-store.interface.js';
import type { ContractContext } from './contract-context.js';
import {
  LEASE_MS,
  RETENTION_MS,
  SCOPE,
  newKey,
  newOwner,
  jobOf,
  fingerprintOf,
  refOf,
  claimOf,
  refusedClaim,
  liveRecord,
  expectRetention,
} from './contract-support.js';

/** `claimInTransaction`: the claim, the work and the record in one transaction. */
export function claimInTransactionCases<Transaction>(context: ContractContext<Transaction>): void {
  const { name, setup, current } = context;
  // Every transactional store of the package has it (SQLite: a claim, then runInTransaction).
  if (!setup.transactional) return;
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
