// Property-based: jsonText (lib/common/json-text.ts), the JSON the admin page, its JSON API and the CLI show. It writes
// what JSON.stringify writes (compact, or indented while the nesting is shallow), cut exactly at maxChars, and a
// deeply nested value of a few hundred kilobytes costs bounded text and time: JSON.stringify with an indent made such
// a dead-set entry 400 MB of text and stalled the application for seconds.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { jsonText } from '../../lib/common/json-text.js';
import { nestedPayload } from '../support/payloads.js';

/** JSON values with what JSON.stringify leaves out or converts: undefined members, functions, Dates, boxed values. */
const displayable = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.jsonValue({ maxDepth: 2 }),
    fc.constantFrom(undefined, () => 1, new Date(0), new Number(4), new String('s'), new Boolean(false), -0),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('jsonText', () => {
  it('writes what JSON.stringify writes, compact and indented', () => {
    fc.assert(
      fc.property(displayable, fc.constantFrom(0, 2, 4), (value, indent) => {
        const expected = JSON.stringify(value, null, indent) ?? 'undefined';
        expect(jsonText(value, { indent, indentDepth: Number.POSITIVE_INFINITY }).text).toBe(expected);
        if (indent === 0) expect(jsonText(value).text).toBe(expected);
      }),
    );
  });

  it('is cut exactly at maxChars, and says so only when it was', () => {
    fc.assert(
      fc.property(displayable, fc.nat(200), (value, maxChars) => {
        const whole = JSON.stringify(value, null, 2) ?? 'undefined';
        const { text, cut } = jsonText(value, { indent: 2, indentDepth: Number.POSITIVE_INFINITY, maxChars });
        if (whole === 'undefined') return;
        expect(text).toBe(whole.slice(0, maxChars));
        expect(cut).toBe(whole.length > maxChars);
      }),
    );
  });

  it('past indentDepth, values are written compact on their line', () => {
    expect(jsonText({ a: [1, { b: [2] }] }, { indent: 2, indentDepth: 1 }).text).toBe('{\n  "a": [1,{"b":[2]}]\n}');
    expect(JSON.parse(jsonText(nestedPayload(50, 3), { indent: 2, indentDepth: 3 }).text)).toEqual(
      nestedPayload(50, 3),
    );
  });

  it('a deeply nested value of ~200 KB: bounded text, whole or cut', () => {
    const value = nestedPayload(2000, 100_000);
    const compact = JSON.stringify(value);
    const indented = jsonText(value, { indent: 2 });
    expect(indented.cut).toBe(false);
    expect(JSON.parse(indented.text)).toEqual(value);
    // Each number on its own line at most 16 levels in: ~35 characters a number, not ~4,000 as with JSON.stringify.
    expect(indented.text.length).toBeLessThan(compact.length + 100_000 * 40);
    const shown = jsonText(value, { indent: 2, maxChars: 20_000 });
    expect(shown).toEqual({ text: indented.text.slice(0, 20_000), cut: true });
  });

  it('a structure deeper than the call stack is written, and circular ones throw as JSON.stringify does', () => {
    const deep = nestedPayload(200_000, 1);
    expect(jsonText(deep, { maxChars: 10 })).toEqual({ text: '[[[[[[[[[[', cut: true });
    const circular: Record<string, unknown> = { a: 1 };
    circular.self = circular;
    expect(() => jsonText(circular)).toThrow(TypeError);
    expect(() => jsonText({ n: 1n })).toThrow(TypeError);
  });
});
