// parseOwnKey reads `<prefix>:{<tag>}:<suffix>` back. The orphan reaper applies it to every key of the server that
// starts like the library's, so it must give the regular expression's answer (`^(.+):\{([^}]+)\}:([a-z]+)$`, the
// rule it had) in linear time: that expression backtracked quadratically on a key of many `:{` (the second hostile
// review of issue 15 measured 3.7 s on a 128 KB key, about 4 minutes at 1 MB, an event loop frozen meanwhile).
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { parseOwnKey } from '../../lib/redis/keys.js';

const rule = (key: string) => {
  const match = /^(.+):\{([^}]+)\}:([a-z]+)$/.exec(key);
  return match ? { prefix: match[1], tag: match[2], suffix: match[3] } : undefined;
};

describe('parseOwnKey', () => {
  it('answers as the regular expression does, on keys made of the characters that matter', () => {
    const piece = fc.constantFrom(':', '{', '}', ':{', '}:', 'a', 'queued', 'v1:', 'X', '');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 14 }), (pieces) => {
        const key = pieces.join('');
        expect(parseOwnKey(key)).toEqual(rule(key));
      }),
      { numRuns: 20_000 },
    );
  });

  it('reads back every key the library builds, whatever its prefix', () => {
    const prefix = fc.string({ minLength: 1, maxLength: 20 });
    const tag = fc.string({ minLength: 1, maxLength: 70 }).filter((text) => !/[{}]/.test(text)); // digests, record ids, names
    const suffix = fc.constantFrom('queued', 'expiring', 'running', 'idempotency', 'index');
    fc.assert(
      fc.property(prefix, tag, suffix, (p, t, s) => {
        expect(parseOwnKey(`${p}:{${t}}:${s}`)).toEqual({ prefix: p, tag: t, suffix: s });
      }),
    );
  });

  it('returns at once on a 1 MB key of `:{` (linear time)', () => {
    const key = `uj:{${':{'.repeat(500_000)}`;
    expect(parseOwnKey(key)).toBeUndefined();
    // The last `:{` leaving a tag of one character or more: the tag is `:{`, the prefix everything before it.
    expect(parseOwnKey(`${key}}:queued`)).toEqual({
      prefix: `uj:{${':{'.repeat(499_998)}`,
      tag: ':{',
      suffix: 'queued',
    });
  });
});
