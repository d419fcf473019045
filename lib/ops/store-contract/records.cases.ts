import { randomUUID } from 'node:crypto';
import { expect, it } from '@jest/globals';
import type { ContractContext } from './contract-context.js';
import {
  RETENTION_MS,
  SCOPE,
  newKey,
  newOwner,
  refOf,
  claimOf,
  refusedClaim,
  liveRecord,
  codePoints,
} from './contract-support.js';

/** Scopes, keys of any characters, get and delete. */
export function recordCases<Transaction>(context: ContractContext<Transaction>): void {
  const { storeOf } = context;
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
}
