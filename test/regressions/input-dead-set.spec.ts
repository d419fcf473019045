// Dead-set bounds against hostile input: an entry whose metadata (a holder's job id taken from a request, a job name,
// the reason that quotes them) is what makes it large is stored cut to maxEntryBytes, never at the expense of the other
// entries; an entry that alone is over maxBytes is refused (and no id is returned for it); list() validates its
// offset and limit and serves any limit.
import { describe, expect, it } from '@jest/globals';
import { UniqueJobsError, type DeadSetBounds } from '../../lib/index.js';
import { sampleEntry, useDeadSets } from '../support/dead-sets.js';

const notExpected = async (): Promise<never> => {
  throw new Error('not expected');
};

describe('dead set: hostile metadata and list arguments', () => {
  const { warnings, deadSet: deadSetOf } = useDeadSets('ujin');
  const deadSet = (bounds: Partial<DeadSetBounds> = {}) => deadSetOf(bounds, notExpected).set;
  const small = sampleEntry;

  it('an entry with 30,000-character metadata is stored within maxEntryBytes; the other entries stay', async () => {
    const set = deadSet({ maxEntryBytes: 10_000, maxBytes: 50_000 });
    const older = [await set.add(small), await set.add(small), await set.add(small)];
    const holder = 'h'.repeat(30_000);
    const id = await set.add({
      ...small,
      jobName: 'n'.repeat(20_000),
      jobId: 'j'.repeat(20_000),
      existingJobId: holder,
      reason: `Rejected a duplicate, locked by job "${holder}"`,
    });
    const stored = await set.get(id);
    expect(stored).toBeDefined();
    expect(Buffer.byteLength(JSON.stringify(stored))).toBeLessThanOrEqual(10_000);
    expect(stored).toMatchObject({ id, truncated: true, queue: 'payments', digest: small.digest });
    expect(stored!.originalBytes).toBeGreaterThan(100_000);
    for (const field of ['jobName', 'jobId', 'existingJobId', 'reason'] as const) {
      expect(stored![field]).toMatch(/…$/);
      expect(stored![field]!.length).toBeGreaterThan(1_000); // an even share, not all for one field
    }
    expect((await set.list()).map((entry) => entry.id)).toEqual([id, ...older.reverse()]);
    expect(await set.bytes()).toBe(
      (await set.list()).reduce((sum, entry) => sum + Buffer.byteLength(JSON.stringify(entry)), 0),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0].length).toBeLessThan(2_000);
  });

  it('an entry that alone is over maxBytes is refused: no id, and no other entry dropped for it', async () => {
    const set = deadSet({ maxBytes: 300 }); // a small entry fits (~250 bytes); a truncated one cannot (~350)
    const kept = await set.add(small);
    const error = await set.add({ ...small, data: { blob: 'x'.repeat(1_000) } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UniqueJobsError);
    expect((error as Error).message).toMatch(/not stored: .* over deadSet\.maxBytes \(300\) on its own/);
    expect((await set.list()).map((entry) => entry.id)).toEqual([kept]);
    expect(await set.size()).toBe(1);
  });

  it('list() serves a limit of 8,100 entries', async () => {
    const set = deadSet();
    const ids = await Promise.all(Array.from({ length: 8_100 }, (_, i) => set.add({ ...small, data: { i } })));
    const listed = await set.list({ limit: 8_100 });
    expect(listed).toHaveLength(8_100);
    expect(new Set(listed.map((entry) => entry.id))).toEqual(new Set(ids));
    expect(await set.list({ offset: 8_000, limit: Number.MAX_SAFE_INTEGER })).toHaveLength(100);
  }, 60_000);

  it.each([
    [{ limit: Number.NaN }, RangeError, 'deadSet.list: limit must be an integer ≥ 0 (got NaN)'],
    [{ offset: 1.5 }, RangeError, 'deadSet.list: offset must be an integer ≥ 0 (got 1.5)'],
    [{ limit: Number.POSITIVE_INFINITY }, RangeError, 'deadSet.list: limit must be an integer ≥ 0 (got Infinity)'],
    [{ offset: -1 }, RangeError, 'deadSet.list: offset must be an integer ≥ 0 (got -1)'],
    [
      { limit: '10' as unknown as number },
      TypeError,
      'deadSet.list: limit must be a number, an integer ≥ 0 (got string)',
    ],
  ])('list(%p) throws a clear error', async (options, type, message) => {
    const set = deadSet();
    await set.add(small);
    const error = await set.list(options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toBe(message);
  });
});
