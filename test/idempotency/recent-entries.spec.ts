// RecentEntries (what the waiting duplicates keep of recent settles and announcements) against a plain Map kept in the
// same order: the same entries, the same ones dropped; and its places stay bounded whatever the churn.
import fc from 'fast-check';
import { RecentEntries } from '../../lib/common/recent-entries.js';

interface Entry {
  at: number;
  n: number;
}

/** The order RecentEntries keeps, read through its private field (the bound is what is tested). */
const placesOf = (entries: RecentEntries<Entry>): number => {
  const inner = entries as unknown as { order: unknown[]; head: number };
  return inner.order.length - inner.head;
};

describe('RecentEntries', () => {
  it('holds and drops what a Map in age order holds and drops, whatever the sets, deletes and passes', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('set' as const), id: fc.integer({ min: 0, max: 9 }), same: fc.boolean() }),
      fc.record({ kind: fc.constant('delete' as const), id: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ kind: fc.constant('drop' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 20, maxLength: 100, size: 'max' }), (ops) => {
        const entries = new RecentEntries<Entry>(10);
        // The model: the Map the waiting duplicates kept before (a new value is moved last, as they did by delete + set).
        const model = new Map<string, Entry>();
        // The last value set for each id, set again by `same` (also after a delete: it goes last then, as in a Map).
        const last = new Map<string, Entry>();
        let now = 0;
        let n = 0;
        for (const step of ops) {
          if (step.kind === 'tick') now += step.ms;
          else if (step.kind === 'delete') expect(entries.delete(`${step.id}`)).toBe(model.delete(`${step.id}`));
          else if (step.kind === 'set') {
            const id = `${step.id}`;
            const entry = step.same && last.has(id) ? last.get(id)! : { at: now, n: n++ };
            last.set(id, entry);
            if (model.get(id) !== entry) model.delete(id);
            model.set(id, entry);
            entries.set(id, entry);
          } else {
            const expected: Entry[] = [];
            for (const [id, entry] of model) {
              if (now - entry.at < 50) break;
              model.delete(id);
              expected.push(entry);
            }
            expect(entries.dropOlder(now, 50)).toEqual(expected);
          }
          expect(entries.size).toBe(model.size);
          for (let id = 0; id < 10; id++) expect(entries.get(`${id}`)).toBe(model.get(`${id}`));
        }
      }),
      { numRuns: 150 },
    );
  });

  it('keeps its places bounded when entries are deleted and set again behind one that stays young', () => {
    const entries = new RecentEntries<Entry>(100);
    entries.set('young', { at: 1_000_000, n: 0 }); // never old enough to pass: every place after it stays
    for (let i = 0; i < 100_000; i++) {
      const id = `${i % 50}`;
      entries.delete(id);
      entries.set(id, { at: i, n: i });
      if (i % 1000 === 0) entries.dropOlder(i, 10);
    }
    expect(entries.size).toBe(51);
    expect(placesOf(entries)).toBeLessThanOrEqual(2 * 100 + 64 + 1);
  });

  it('gives back the places a pass went past', () => {
    const entries = new RecentEntries<Entry>(100_000);
    for (let i = 0; i < 10_000; i++) entries.set(`${i}`, { at: i, n: i });
    expect(entries.dropOlder(20_000, 10)).toHaveLength(10_000);
    expect(entries.size).toBe(0);
    expect(placesOf(entries)).toBe(0);
  });
});
