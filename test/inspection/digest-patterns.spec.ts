// Digest patterns (`locks list <glob>`, the admin's `?pattern=`, `LockInspector.listLocks({ pattern })`) are matched
// in linear time: the glob matcher agrees with a simple reference (dynamic programming, no backtracking) and with the
// regular expression it replaced on short patterns, and patterns that made that regular expression backtrack for
// minutes (`***************v*`, `*a*a*…*b`, 200 characters of `*?`) are answered at once, against real locks.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { LockInspector, parseDigestPattern } from '../../lib/index.js';
import { digestPatternMatcher } from '../../lib/ops/inspection/digest-format.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf } from '../support/locks.js';
import { bullPrefix } from '../support/redis.js';

/**
 * Patterns that make a backtracking regular expression explode on a 67-character digest. Redis's own MATCH lets every
 * digest through the first two (Redis's matcher does not backtrack), so the old code ran the regular expression on
 * each; `*a…*b` explodes on texts rich in `a`; 200 characters of `*?` need 100 characters.
 */
const PATHOLOGICAL = ['***************v*', '*?'.repeat(33), '*a*a*a*a*a*a*a*a*a*a*a*a*b', '*?'.repeat(100)];

/** Reference glob matching: `*` any run, `?` one character. Dynamic programming, O(pattern × text), no recursion. */
function referenceMatches(pattern: string, text: string): boolean {
  // row[j]: whether the pattern so far matches text.slice(0, j)
  let row = Array.from({ length: text.length + 1 }, (_, j) => j === 0);
  for (const c of pattern) {
    const next = Array.from({ length: text.length + 1 }, () => false);
    for (let j = 0; j <= text.length; j++) {
      if (c === '*') next[j] = row[j] || (j > 0 && next[j - 1]);
      else next[j] = j > 0 && row[j - 1] && (c === '?' || c === text[j - 1]);
    }
    row = next;
  }
  return row[text.length];
}

/** The regular expression the inspector used before (exponential on many `*`): a reference for short patterns. */
function oldRegExp(pattern: string): RegExp {
  return new RegExp(`^${[...pattern].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c)).join('')}$`);
}

const patternOf = (alphabet: string[], maxLength: number) =>
  fc.array(fc.constantFrom(...alphabet, '*', '?'), { maxLength }).map((chars) => chars.join(''));
const textOf = (alphabet: string[], maxLength: number) =>
  fc.array(fc.constantFrom(...alphabet), { maxLength }).map((chars) => chars.join(''));

describe('digest pattern matcher', () => {
  it('agrees with a dynamic-programming reference on random patterns and texts', () => {
    fc.assert(
      fc.property(patternOf(['a', 'b', 'v', ':'], 16), textOf(['a', 'b', 'v', ':'], 16), (pattern, text) => {
        expect(digestPatternMatcher(pattern)(text)).toBe(referenceMatches(pattern, text));
      }),
      { numRuns: 3000 },
    );
  });

  it('agrees with the regular expression it replaced on short patterns, and on texts built to match', () => {
    const short = patternOf(['a', 'b', '1'], 8);
    fc.assert(
      fc.property(short, textOf(['a', 'b', '1'], 10), (pattern, text) => {
        expect(digestPatternMatcher(pattern)(text)).toBe(oldRegExp(pattern).test(text));
      }),
      { numRuns: 3000 },
    );
    // A text made from the pattern (each `*` some characters, each `?` one) always matches.
    const filled = fc
      .tuple(short, fc.array(textOf(['a', 'b'], 3), { minLength: 8, maxLength: 8 }))
      .map(([pattern, fills]) => ({
        pattern,
        text: [...pattern].map((c, i) => (c === '*' ? fills[i] : c === '?' ? 'b' : c)).join(''),
      }));
    fc.assert(
      fc.property(filled, ({ pattern, text }) => {
        expect(digestPatternMatcher(pattern)(text)).toBe(true);
        expect(oldRegExp(pattern).test(text)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('answers pathological patterns in linear time', () => {
    const digests = Array.from({ length: 1000 }, (_, i) => `v1:${(i * 2654435761).toString(16).padStart(64, 'a')}`);
    for (const pattern of [...PATHOLOGICAL, `${'*a'.repeat(100)}`, `${'?*'.repeat(99)}v`]) {
      const matches = digestPatternMatcher(parseDigestPattern(pattern));
      const started = performance.now();
      const found = new Set(digests.filter((digest) => matches(digest)));
      const elapsed = performance.now() - started;
      expect(elapsed).toBeLessThan(500); // 1000 digests; a backtracking RegExp takes minutes for one
      const sample = digests.slice(0, 100); // the reference is slower (it allocates), not slower in kind
      expect([pattern, sample.filter((digest) => found.has(digest))]).toEqual([
        pattern,
        sample.filter((digest) => referenceMatches(pattern, digest)),
      ]);
    }
  });

  it('collapses runs of `*` (the pattern Redis SCAN MATCH gets too) without changing what matches', () => {
    expect(parseDigestPattern('***************v*')).toBe('*v*');
    expect(parseDigestPattern('ab**c***')).toBe('v1:ab*c*');
    expect(parseDigestPattern('*?**?')).toBe('*?*?');
    fc.assert(
      fc.property(patternOf(['a', 'b'], 12), textOf(['a', 'b'], 10), (pattern, text) => {
        const collapsed = pattern.replace(/\*+/g, '*');
        expect(referenceMatches(collapsed, text)).toBe(referenceMatches(pattern, text));
      }),
    );
  });
});

describe('LockInspector with pathological digest patterns', () => {
  const { redis, start } = useApps('pat', { unique: { lock: 'until_executed', lockArgs: byId }, paused: true });
  const ids = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7'];

  async function lockedApp(app: TestApp): Promise<{ inspector: LockInspector; digests: string[] }> {
    for (const id of ids) await app.queue.add('job', { id });
    const inspector = new LockInspector({
      client: redis,
      prefix: app.prefix,
      queues: [{ name: app.queue.name, prefix: bullPrefix() }],
    });
    return { inspector, digests: ids.map((id) => digestOf(app, 'job', { id })).sort() };
  }

  for (const [label, unique] of [
    ['fast-path locks (deduplication keys)', { lock: 'until_executed', lockArgs: byId }],
    ['general-path locks (lockLimit 2)', { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }],
  ] as const) {
    it(`lists ${label} promptly and right for every pathological pattern`, async () => {
      const app = await start({ unique });
      const { inspector, digests } = await lockedApp(app);
      // One that matches a single digest but is just as hostile to backtracking: its characters, each after a `*`.
      const subsequence = `*${[...digests[3].slice(3, 23)].join('*')}*`;
      for (const pattern of [...PATHOLOGICAL, subsequence]) {
        const started = performance.now();
        const page = await inspector.listLocks({ pattern }, { limit: 1000 });
        const elapsed = performance.now() - started;
        const expected = digests.filter((digest) => referenceMatches(parseDigestPattern(pattern), digest));
        expect([pattern, page.cursor, page.locks.map((lock) => lock.digest).sort()]).toEqual([pattern, '0', expected]);
        expect(elapsed).toBeLessThan(5000);
      }
      expect((await inspector.listLocks({ pattern: PATHOLOGICAL[0] })).locks).toHaveLength(ids.length);
      expect((await inspector.listLocks({ pattern: subsequence })).locks.map((lock) => lock.digest)).toContain(
        digests[3],
      );
      expect((await inspector.listLocks({ pattern: PATHOLOGICAL[1] })).locks).toHaveLength(ids.length);
      expect((await inspector.listLocks({ pattern: PATHOLOGICAL[3] })).locks).toEqual([]); // needs ≥ 100 characters
    });
  }
});
