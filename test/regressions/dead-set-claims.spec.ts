// Session 49's review (helper-155) of the dead-set retry's claim: a claim put back once its lease ended skipped the
// bounds (the dead set over maxSize and maxBytes, and bytes() 0 with an entry held when it was the only one); a
// failed retry's put-back refused for its size dropped the entry without a word; and an enqueue that outlasted the
// claim's lease (enqueueTimeout false or long) let a second retry take the entry beside it.
import { describe, expect, it } from '@jest/globals';
import type { DeadSetService } from '../../lib/index.js';
import type { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { enqueuedResult, expectNeverTaken, refusedRequeue, sampleEntry, useDeadSets } from '../support/dead-sets.js';
import { scanKeys } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('dead-set retry claims', () => {
  const { redis, warnings, deadSet, racing } = useDeadSets('ujdc');
  const entry = sampleEntry;

  const bounds = [10_000, 60_000, Number.MAX_SAFE_INTEGER, 60_000];
  const setKeysOf = (keys: UniqueJobsKeys) => [
    keys.deadSetIndex,
    keys.deadSetEntries,
    keys.deadSetBytes,
    keys.deadSetClaims,
  ];

  /**
   * A retry's claim of `id` that is never renewed nor settled (its process died, or stalled), `leaseMs` long, under
   * `token`: the entry's JSON and score as claimed.
   */
  async function abandonedClaim(keys: UniqueJobsKeys, id: string, leaseMs: number, token = 'gone'): Promise<string[]> {
    const claimed = await new RedisScripts(redis).run('deadSetClaim', setKeysOf(keys), [id, leaseMs, ...bounds, token]);
    expect(claimed).not.toBeNull();
    return claimed as string[];
  }

  /** Until the abandoned claims are put back (any read of the dead set does it once their lease ended). */
  async function claimsReturned(set: DeadSetService, keys: UniqueJobsKeys): Promise<void> {
    await waitFor(
      'the claims put back',
      async () => (await set.size()) >= 0 && !(await redis.exists(keys.deadSetClaims)),
    );
  }

  it('a claim put back after its lease goes through the bounds: the oldest, it is the one maxSize drops', async () => {
    const { set, keys } = deadSet({ maxSize: 2 });
    const oldest = await set.add(entry);
    const younger = await set.add(entry);
    await abandonedClaim(keys, oldest, 100);
    const added = await set.add(entry); // room: the claimed entry is out
    await claimsReturned(set, keys);
    expect((await set.list()).map((e) => e.id)).toEqual([added, younger]);
    const jsons = await redis.hvals(keys.deadSetEntries);
    expect(jsons).toHaveLength(2);
    expect(await set.bytes()).toBe(jsons.reduce((sum, json) => sum + Buffer.byteLength(json), 0));
  });

  it('the only entry, put back after its lease: counted in bytes(), with the expiry maxAge gives', async () => {
    const { set, keys } = deadSet();
    const id = await set.add(entry);
    const json = (await redis.hget(keys.deadSetEntries, id))!;
    await abandonedClaim(keys, id, 100);
    expect(await set.bytes()).toBe(0);
    await claimsReturned(set, keys);
    expect((await set.list()).map((e) => e.id)).toEqual([id]);
    expect(await set.bytes()).toBe(Buffer.byteLength(json));
    for (const key of [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes]) {
      expect(await redis.pttl(key)).toBeGreaterThan(0);
    }
  });

  it('a failed retry whose entry is now over maxBytes on its own says it could not be put back', async () => {
    const { set: wide, keys, prefix } = deadSet();
    const id = await wide.add({ ...entry, data: { id: 'a', text: 'x'.repeat(2_000) } });
    const { set: narrow } = deadSet({ maxBytes: 1_000 }, refusedRequeue, prefix); // the bound lowered since
    await expect(narrow.retry(id)).rejects.toThrow('enqueue refused');
    expect(warnings).toEqual([
      expect.stringMatching(new RegExp(`^Dead-set entry ${id} could not be put back: .*1000`)),
    ]);
    expect(await narrow.size()).toBe(0);
    expect(await scanKeys(redis, `${prefix}:{dead}:*`)).toEqual([]);
    expect(await redis.exists(keys.deadSetClaims)).toBe(0);
  });

  it('an enqueue that outlasts the claim lease keeps its claim: no second retry takes the entry meanwhile', async () => {
    const { requeues, slow, other, keys, prefix } = racing();
    const id = await slow.add(entry);
    const retrying = slow.retry(id);
    await waitFor('the slow retry to start', () => requeues.waiting);
    await expectNeverTaken(other, id, 1_200); // four leases: the renewed claim refuses the other process every time
    requeues.release();
    await expect(retrying).resolves.toEqual(enqueuedResult);
    expect([requeues.slowCalls, requeues.fastCalls]).toEqual([1, 0]);
    expect(await other.size()).toBe(0);
    expect(await scanKeys(redis, `${prefix}:{dead}:*`)).toEqual([]);
    expect(await redis.exists(keys.deadSetClaims)).toBe(0);
  });

  it('a retry whose claim lapsed (stalled) neither ends nor renews the claim another retry took since', async () => {
    const { requeues, slow: b, other: c, keys, prefix } = racing();
    const id = await b.add(entry);
    const [json, since] = await abandonedClaim(keys, id, 100, 'stalled'); // retry A, stalled past its lease
    await waitFor('the lapsed claim back in the dead set', () => b.get(id)); // any read puts it back
    const retrying = b.retry(id); // retry B claims it, and stays in its enqueue (renewing)
    await waitFor('retry B in its enqueue', () => requeues.waiting);
    // A wakes and settles as failed, then renews: neither touches B's claim.
    const settle = (outcome: string) =>
      new RedisScripts(redis).run('deadSetSettle', setKeysOf(keys), [
        id,
        since,
        json,
        outcome,
        ...bounds,
        300,
        'stalled',
      ]);
    expect(await settle('failed')).toBe(0);
    expect(await settle('renew')).toBe(0);
    await expect(c.retry(id)).resolves.toBeUndefined();
    requeues.release();
    await expect(retrying).resolves.toEqual(enqueuedResult);
    expect([requeues.slowCalls, requeues.fastCalls]).toEqual([1, 0]);
    expect(await scanKeys(redis, `${prefix}:{dead}:*`)).toEqual([]);
  });

  it("a failed retry of the only entry, from a process that does not know maxAge (the CLI), keeps the set's expiry", async () => {
    let fail: ((error: Error) => void) | undefined;
    const { set: app, keys, prefix } = deadSet();
    const id = await app.add(entry);
    const before = await redis.pttl(keys.deadSetEntries);
    const { set: cli } = deadSet(
      { maxAge: undefined, retryClaimMs: 300 },
      () => new Promise((_, reject) => (fail = reject)),
      prefix,
    );
    const retrying = cli.retry(id);
    await waitFor('the retry in its enqueue', () => fail !== undefined);
    // Renewed (every 100 ms): the claims key keeps the expiry it took from the set.
    const [member] = await redis.zrange(keys.deadSetClaims, '0', '0');
    const first = await redis.zscore(keys.deadSetClaims, member);
    await waitFor('a renewal', async () => (await redis.zscore(keys.deadSetClaims, member)) !== first);
    fail!(new Error('enqueue refused'));
    await expect(retrying).rejects.toThrow('enqueue refused');
    expect((await cli.list()).map((e) => e.id)).toEqual([id]);
    for (const key of [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes]) {
      expect(await redis.pttl(key)).toBeGreaterThan(before - 10_000);
    }
  });
});
