// Property-based: describeThrown / asError (lib/errors/thrown.ts), how the library names whatever a handler or a key
// function throws: it never throws itself, always gives strings within their bounds, never splits a surrogate pair,
// and keeps the name and message of anything that has string ones.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { asError, describeThrown } from '../../lib/errors/thrown.js';

/** A surrogate without its other half: what cutting inside a pair leaves. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Values without a usable string form or whose reads throw. */
const hostile = fc.constantFrom<unknown>(
  Object.create(null),
  Symbol('s'),
  10n,
  { toString: () => ({}), valueOf: () => ({}) },
  {
    get name(): string {
      throw new Error('getter');
    },
    get message(): string {
      throw new Error('getter');
    },
  },
  new Proxy(
    {},
    {
      get: () => {
        throw new Error('trap');
      },
    },
  ),
);

const thrown = fc.oneof(
  fc.anything({ withBigInt: true, withNullPrototype: true, withBoxedValues: true }),
  hostile,
  fc.record({
    name: fc.string({ unit: 'grapheme', maxLength: 300 }),
    message: fc.string({ unit: 'grapheme', maxLength: 3000 }),
  }),
  fc.string({ unit: 'grapheme', minLength: 1990, maxLength: 2100 }).map((message) => new Error(message)),
);

describe('describeThrown', () => {
  it('never throws; name and message are well-formed strings of at most 200 and 2,000 code units', () => {
    fc.assert(
      fc.property(thrown, (value) => {
        const { name, message } = describeThrown(value);
        expect(name.length).toBeGreaterThan(0);
        expect(name.length).toBeLessThanOrEqual(200);
        expect(message.length).toBeLessThanOrEqual(2_000);
        expect(LONE_SURROGATE.test(name) || LONE_SURROGATE.test(message)).toBe(false);
        expect(asError(value)).toBeInstanceOf(Error);
      }),
    );
  });

  it('keeps the string name and message of any object, and cuts a long message with an ellipsis', () => {
    expect(describeThrown({ name: 'CardDeclined', message: 'insufficient funds' })).toEqual({
      name: 'CardDeclined',
      message: 'insufficient funds',
    });
    expect(describeThrown(new TypeError('bad'))).toEqual({ name: 'TypeError', message: 'bad' });
    expect(describeThrown('plain text')).toEqual({ name: 'Error', message: 'plain text' });
    expect(describeThrown(null)).toEqual({ name: 'Error', message: 'null' });
    expect(describeThrown(Object.create(null))).toEqual({
      name: 'Error',
      message: 'a thrown object without a string form',
    });
    const cut = describeThrown(new Error(`${'a'.repeat(1998)}😀😀`)).message;
    expect(cut).toBe(`${'a'.repeat(1998)}…`); // the emoji that would be split is left out whole
  });
});
