// Property-based: the canonical JSON and the uniqueness digest. Equal values (whatever their key order, prototype or
// wrapping) hash the same, different values hash differently, what BullMQ stores hashes like what the producer passed,
// and every value JSON would drop or mangle is refused with UnserializableLockArgsError naming where it is.
// fast-check prints the seed and the shrunk counterexample of any failure.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { canonicalJson, digest, lockKey, UnserializableLockArgsError, type UniqueAcross } from '../../lib/index.js';
import { MAX_CANONICAL_DEPTH } from '../../lib/digest/canonical-json.js';
import {
  hostileString,
  jsonContainer,
  jsonEqual,
  jsonish,
  leaf,
  wellFormed,
  mutate,
  mutation,
  objectKey,
  planted,
  prng,
  reordered,
  setProperty,
} from './arbitraries.js';

const DIGEST_FORM = /^v1:[0-9a-f]{64}$/;

const of = (lockArgs: unknown, picked = false) => digest({ queue: 'payments', name: 'settle', lockArgs, picked });

/** The error `fn` throws, asserted to be an UnserializableLockArgsError. */
function refusal(fn: () => unknown): UnserializableLockArgsError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(UnserializableLockArgsError);
    return error as UnserializableLockArgsError;
  }
  throw new Error('expected an UnserializableLockArgsError, nothing was thrown');
}

/** The same value with every number 0 written as -0. */
function negativeZeros(value: unknown): unknown {
  if (value === 0) return -0;
  if (Array.isArray(value)) return value.map(negativeZeros);
  if (typeof value !== 'object' || value === null) return value;
  const copy = {};
  for (const [key, item] of Object.entries(value)) setProperty(copy, key, negativeZeros(item));
  return copy;
}

/** Values from a tiny pool, so that two draws are often equal and near-equal (0 / -0 / "0" / [0] / {"0": 0}). */
const tinyValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(0, -0, '0', '', null, false, 'a', 'é', 'e\u0301', '\ud800', '\ufffd'),
    fc.array(tie('value'), { maxLength: 2 }),
    fc.dictionary(fc.constantFrom('0', 'a', '__proto__'), tie('value'), { maxKeys: 2 }),
  ),
})).value;

describe('canonical JSON and the digest: equal values, equal digests', () => {
  it('key order never matters, at any depth, nor an object prototype', () => {
    fc.assert(
      fc.property(jsonish, fc.integer(), (value, seed) => {
        const shuffled = reordered(value, prng(seed));
        expect(canonicalJson(shuffled)).toBe(canonicalJson(value));
        expect(of(shuffled)).toBe(of(value));
      }),
      { numRuns: 300 },
    );
  });

  it('the canonical text is JSON of the same value, and the data as BullMQ stores it hashes the same', () => {
    fc.assert(
      fc.property(jsonish, (value) => {
        const text = canonicalJson(value);
        const read = JSON.parse(text) as unknown;
        expect(jsonEqual(read, value)).toBe(true);
        // idempotent: the canonical text of the canonical text is itself
        expect(canonicalJson(read)).toBe(text);
        // a worker computes the digest from the stored (JSON round-tripped) data: it must be the producer's
        expect(of(JSON.parse(JSON.stringify(value)))).toBe(of(value));
        expect(of(value)).toMatch(DIGEST_FORM);
      }),
      { numRuns: 300 },
    );
  });

  it('-0 hashes as 0 (JSON writes both as 0, so BullMQ stores 0)', () => {
    fc.assert(
      fc.property(jsonish, (value) => {
        expect(of(negativeZeros(value))).toBe(of(value));
      }),
      { numRuns: 200 },
    );
  });

  it('boxed primitives, class instances and Dates hash as their JSON form', () => {
    class Payment {
      constructor(
        readonly id: string,
        readonly amount: number,
      ) {}
      get cents(): number {
        return this.amount * 100;
      }
    }
    fc.assert(
      fc.property(
        hostileString(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.boolean(),
        fc.integer({ min: -8.64e15, max: 8.64e15 }),
        (text, amount, flag, time) => {
          expect(of(new String(text))).toBe(of(text));
          expect(of(new Number(amount))).toBe(of(amount));
          expect(of(new Boolean(flag))).toBe(of(flag));
          expect(of([new Number(amount), { s: new String(text) }])).toBe(of([amount, { s: text }]));
          // a class instance is its own enumerable fields (getters on the prototype are not data), as in JSON
          expect(of(new Payment(text, amount))).toBe(of({ id: text, amount }));
          const at = new Date(time);
          expect(of({ at })).toBe(of({ at: at.toISOString() }));
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('canonical JSON and the digest: different values, different digests', () => {
  const sameDigestIffEqual = ([a, b]: [unknown, unknown]) => {
    expect(of(a) === of(b)).toBe(jsonEqual(a, b));
    expect(canonicalJson(a) === canonicalJson(b)).toBe(jsonEqual(a, b));
  };

  it('two arbitrary values', () => {
    fc.assert(fc.property(fc.tuple(jsonish, jsonish), sameDigestIffEqual), { numRuns: 200 });
  });

  it('two values from a tiny pool (0 / -0 / "0" / [0] / {"0": 0}, é precomposed or not, lone surrogates)', () => {
    fc.assert(fc.property(fc.tuple(tinyValue, tinyValue), sameDigestIffEqual), { numRuns: 500 });
  });

  it('a value and a small edit of it (a leaf, a key added or removed, a wrap, an array made an object)', () => {
    fc.assert(
      fc.property(
        jsonish.chain((value) => mutation.map((edit): [unknown, unknown] => [value, mutate(value, edit)])),
        sameDigestIffEqual,
      ),
      { numRuns: 400 },
    );
  });

  it('an array and the object with its index keys never hash the same', () => {
    fc.assert(
      fc.property(fc.array(jsonish, { maxLength: 4 }), (items) => {
        const indexed = {};
        items.forEach((item, i) => setProperty(indexed, String(i), item));
        expect(of(indexed)).not.toBe(of(items));
      }),
      { numRuns: 100 },
    );
  });

  it('unicode is compared code unit by code unit: no normalization, lone surrogates kept apart from U+FFFD', () => {
    fc.assert(
      fc.property(hostileString({ minLength: 1 }), (text) => {
        const nfd = text.normalize('NFD');
        expect(of(nfd) === of(text)).toBe(nfd === text);
        const mended = wellFormed(text);
        expect(of(mended) === of(text)).toBe(mended === text);
        expect(of({ [text]: 1 }) === of({ [mended]: 1 })).toBe(mended === text);
      }),
      { numRuns: 300 },
    );
  });

  it('queue, job name and lock arguments are never confused with each other, nor uniqueAcross settings', () => {
    const part = fc.constantFrom('a', 'b', 'a:b', 'b:a', '"a"', 'a,b', '', 'null');
    const across = fc.constantFrom<UniqueAcross[]>([], ['queues'], ['names'], ['queues', 'names']);
    const input = fc.record({ queue: part, name: part, lockArgs: fc.oneof(part, tinyValue), uniqueAcross: across });
    fc.assert(
      fc.property(input, input, (x, y) => {
        const effective = (i: typeof x) => [
          i.uniqueAcross.includes('queues') ? null : i.queue,
          i.uniqueAcross.includes('names') ? null : i.name,
          i.lockArgs,
        ];
        expect(digest(x) === digest(y)).toBe(jsonEqual(effective(x), effective(y)));
      }),
      { numRuns: 500 },
    );
  });
});

describe('canonical JSON and the digest: size and depth', () => {
  it(`nesting up to ${MAX_CANONICAL_DEPTH} arrays and objects hashes (stably); deeper is refused at the level past it`, () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 500, max: MAX_CANONICAL_DEPTH + 30 }),
        fc.integer(),
        leaf,
        leaf,
        (depth, seed, leafA, leafB) => {
          const random = prng(seed);
          const kinds = Array.from({ length: depth }, () => random() < 0.5);
          const nest = (inner: unknown) =>
            kinds.reduce<unknown>((value, isArray) => (isArray ? [value] : { k: value }), inner);
          const a = nest(leafA);
          if (depth > MAX_CANONICAL_DEPTH) {
            const error = refusal(() => of(a));
            expect(error.reason).toContain(`nested deeper than ${MAX_CANONICAL_DEPTH}`);
            // the path goes down to the first container past the limit
            expect(error.path.split(/\[0\]|\.k/).length - 1).toBe(MAX_CANONICAL_DEPTH);
            return;
          }
          expect(of(a)).toMatch(DIGEST_FORM);
          expect(of(nest(leafA))).toBe(of(a));
          expect(of(nest(leafB)) === of(a)).toBe(jsonEqual(leafA, leafB));
        },
      ),
      { numRuns: 40 },
    );
  });

  it('1 MB strings (as values and as keys): equal copies hash the same, one changed character changes the digest', () => {
    const MB = 1024 * 1024;
    fc.assert(
      fc.property(
        hostileString({ minLength: 1, maxLength: 8 }),
        fc.nat(),
        hostileString({ minLength: 1, maxLength: 1 }),
        (chunk, at, replacement) => {
          const big = chunk.repeat(Math.ceil(MB / chunk.length)).slice(0, MB);
          const copy = [...big].join('');
          const index = at % big.length;
          const edited = big.slice(0, index) + replacement + big.slice(index + 1);
          expect(of({ payload: copy })).toBe(of({ payload: big }));
          expect(of({ payload: edited }) === of({ payload: big })).toBe(edited === big);
          expect(of({ [edited]: 1 }) === of({ [big]: 1 })).toBe(edited === big);
          const key = lockKey({ queue: 'payments', name: 'settle', lockArgs: { payload: big } });
          expect(key).toMatch(/^bull:payments:de:uj:v1:[0-9a-f]{64}$/);
        },
      ),
      { numRuns: 4 },
    );
  });
});

describe('canonical JSON and the digest: unserializable values are refused with a typed error and their path', () => {
  it('anywhere in whole job data', () => {
    fc.assert(
      fc.property(planted('skip'), ({ value, path }) => {
        expect(refusal(() => canonicalJson(value)).path).toBe(path);
        const error = refusal(() => of(value));
        expect(error.path).toBe(path);
        // The message shows a long path's beginning (500 code units at most): deep data would flood a log line.
        expect(error.message).toContain(path.length > 500 ? `at ${path.slice(0, 400)}` : `at ${path}:`);
        expect(error.message.length).toBeLessThan(1_000);
      }),
      { numRuns: 400 },
    );
  });

  it('anywhere in what a lockArgs function returned (undefined properties included: a missing field)', () => {
    fc.assert(
      fc.property(planted('reject'), ({ value, path }) => {
        expect(refusal(() => of(value, true)).path).toBe(path);
      }),
      { numRuns: 300 },
    );
  });

  it('an undefined property of whole job data is skipped, as JSON (and so BullMQ) skips it', () => {
    fc.assert(
      fc.property(
        jsonContainer.filter((c) => !Array.isArray(c)),
        objectKey,
        (object, key) => {
          const withUndefined = {};
          for (const [k, v] of Object.entries(object)) setProperty(withUndefined, k, v);
          setProperty(withUndefined, key, undefined);
          const without = JSON.parse(JSON.stringify(withUndefined)) as unknown;
          expect(of(withUndefined)).toBe(of(without));
          expect(refusal(() => of(withUndefined, true)).path).toBe(`$.${key}`);
        },
      ),
      { numRuns: 100 },
    );
  });
});
