// Session 39 review of the dead set's put-back (a retry whose enqueue fails puts its entry back as old as it was). Each
// case failed before its fix.
//
// D1. The put-back was scored with the entry's `rejectedAt`, the clock of the process that rejected the duplicate
//     (`Date.now()`), while the index scores entries with Redis' clock. An entry rejected by an instance whose clock ran
//     ahead went back in the future: younger than it was, listed first, and every entry added afterwards was scored
//     after it (scores strictly increase), so none of them aged out until Redis' clock caught up. A `rejectedAt` that
//     is not a finite number (an old or hand-edited entry: `1e999` parses as Infinity) went back scored +inf, and its
//     JSON, written again with `JSON.stringify`, said `"rejectedAt":null`: unreadable, never retried again. It now
//     goes back with the score and the JSON it had in the index.
// D2. The byte bound never dropped the entry being stored: right for a new entry (it alone fits), wrong for one put
//     back as old as it was. An entry added while the retry was on its way (the dead set had room: the entry was out)
//     then made the put-back evict younger entries in its place, where the entry count bound drops the put-back one
//     first, as the oldest.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { sampleEntry, useDeadSets } from '../support/dead-sets.js';
import { waitFor } from '../support/wait.js';

describe('session 39 review: a dead-set entry put back after its retry failed', () => {
  const { redis, deadSet } = useDeadSets('ujs39');
  const entry = sampleEntry;

  /** Redis' clock (ms), which scores the entries. */
  async function serverNow(): Promise<number> {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Number(micros) / 1000;
  }

  /** Rewrites an entry's `rejectedAt` in its stored JSON (as another instance's clock, or a hand edit, wrote it). */
  async function setRejectedAt(keys: UniqueJobsKeys, id: string, rejectedAt: string): Promise<void> {
    const json = (await redis.hget(keys.deadSetEntries, id))!;
    await redis.hset(keys.deadSetEntries, id, json.replace(/"rejectedAt":[^,}]+/, `"rejectedAt":${rejectedAt}`));
  }

  it('D1: rejected by an instance whose clock ran an hour ahead, it keeps its score (Redis time)', async () => {
    const { set, keys } = deadSet();
    const id = await set.add(entry);
    const score = await redis.zscore(keys.deadSetIndex, id);
    const { rejectedAt } = (await set.get(id))!;
    await setRejectedAt(keys, id, String(rejectedAt + 3_600_000));
    await waitFor('time to pass', async () => (await serverNow()) > Number(score) + 20);

    await expect(set.retry(id)).rejects.toThrow('enqueue refused');
    expect(await redis.zscore(keys.deadSetIndex, id)).toBe(score);
    // An entry added afterwards is the newest, scored by Redis' clock.
    const later = await set.add(entry);
    expect(Number(await redis.zscore(keys.deadSetIndex, later))).toBeLessThan((await serverNow()) + 1_000);
    expect((await set.list()).map((e) => e.id)).toEqual([later, id]);
  });

  it('D1: a rejectedAt that is not a finite number goes back as it was, readable, and scores nothing', async () => {
    const { set, keys } = deadSet();
    const id = await set.add(entry);
    const score = await redis.zscore(keys.deadSetIndex, id);
    await setRejectedAt(keys, id, '1e999'); // JSON.parse: Infinity
    const json = await redis.hget(keys.deadSetEntries, id);

    await expect(set.retry(id)).rejects.toThrow('enqueue refused');
    expect(await redis.zscore(keys.deadSetIndex, id)).toBe(score);
    expect(await redis.hget(keys.deadSetEntries, id)).toBe(json);
    expect((await set.get(id))?.truncated).toBeUndefined(); // still retryable
    const later = await set.add(entry);
    expect(Number(await redis.zscore(keys.deadSetIndex, later))).toBeLessThan((await serverNow()) + 1_000);
  });

  it('D2: under maxBytes, the entry put back is dropped as the oldest, not a younger entry in its place', async () => {
    let added: string | undefined;
    const bytes = Buffer.byteLength(JSON.stringify({ ...entry, id: 'x'.repeat(36), rejectedAt: Date.now() }));
    // Room for two entries. While the retry is on its way (its entry out of the dead set), another duplicate is
    // rejected; then the retry fails.
    const { set } = deadSet({ maxBytes: Math.floor(bytes * 2.5) }, async () => {
      added = await set.add(entry);
      throw new Error('enqueue refused');
    });
    const oldest = await set.add(entry);
    const younger = await set.add(entry);

    await expect(set.retry(oldest)).rejects.toThrow('enqueue refused');
    expect((await set.list()).map((e) => e.id)).toEqual([added, younger]);
    expect(await set.bytes()).toBeLessThanOrEqual(Math.floor(bytes * 2.5));
  });

  it('D2: under maxSize, the same: the entry put back is the one dropped', async () => {
    let added: string | undefined;
    const { set } = deadSet({ maxSize: 2 }, async () => {
      added = await set.add(entry);
      throw new Error('enqueue refused');
    });
    const oldest = await set.add(entry);
    const younger = await set.add(entry);

    await expect(set.retry(oldest)).rejects.toThrow('enqueue refused');
    expect((await set.list()).map((e) => e.id)).toEqual([added, younger]);
  });
});
