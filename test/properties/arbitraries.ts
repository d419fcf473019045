// Generators shared by the property-based suites: JSON-like values with hostile strings and keys, value pairs that are
// equal with their keys in another order, and unserializable values planted at a known path of a JSON value.
import fc from 'fast-check';
import { MAX_CANONICAL_DEPTH } from '../../lib/digest/canonical-json.js';

/** Characters that would break a Redis key pattern, a hash tag, a log line or a naive escaping if they reached a key. */
export const HOSTILE_CHARACTERS = [
  '*',
  '?',
  '[',
  ']',
  '{',
  '}',
  '\n',
  '\r',
  ' ',
  '\t',
  ':',
  '\u0000',
  '"',
  '\\',
  '/',
  '%',
  'é', // precomposed
  'e\u0301', // e + combining acute: the same text to a reader, other code points
  '😀', // a surrogate pair
  '\ud83d', // a lone high surrogate
  '\ude00', // a lone low surrogate
  '東',
  '\u2028',
  '\ufeff',
  '\ufffd',
] as const;

/** One unit of a hostile string: a hostile character, any code point, or any lone surrogate. */
const hostileUnit = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_CHARACTERS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
);

/** A string of hostile units (may be empty). */
export const hostileString = (constraints: { minLength?: number; maxLength?: number } = {}) =>
  fc.string({ unit: hostileUnit, maxLength: 12, ...constraints });

/** A hostile string that always holds at least one character that must never appear in a key name. */
export const markedHostileString = fc
  .tuple(
    hostileString(),
    fc.constantFrom('*', '{', '}', '\n', '\r', ' ', '"', '\u0000', '😀', '\ud800'),
    hostileString(),
  )
  .map(([before, mark, after]) => `${before}${mark}${after}`);

/** The string with every lone surrogate replaced by U+FFFD (what a UTF-8 encoder writes for it). */
export const wellFormed = (text: string) =>
  text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');

/** Object keys: hostile strings and the names that trip up naive code (prototype keys, integer-like keys). */
export const objectKey = fc.oneof(
  hostileString(),
  fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', '0', '1', '10', '01', '-1', '1.5', ''),
  fc.nat(12).map(String),
);

/** Leaves: null, booleans, every finite double (-0 included), safe integers, hostile strings. */
export const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.constantFrom(0, -0, 1, -1, 1e21, 5e-324, Number.MAX_SAFE_INTEGER),
  hostileString(),
);

/** Defines an own enumerable property (so that a `__proto__` key is a key, not a prototype change). */
export function setProperty(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A JSON value as a user might pass it: nested arrays and objects (some with a null prototype) of {@link leaf}. */
export const jsonish: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown; array: unknown[]; object: object }>(
  (tie) => ({
    value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
    array: fc.array(tie('value'), { maxLength: 5 }),
    object: fc
      .tuple(
        fc.uniqueArray(fc.tuple(objectKey, tie('value')), { maxLength: 5, selector: ([key]) => key }),
        fc.boolean(),
      )
      .map(([entries, nullPrototype]) => {
        const object = nullPrototype ? (Object.create(null) as object) : {};
        for (const [key, value] of entries) setProperty(object, key, value);
        return object;
      }),
  }),
).value;

/** A JSON array or object (a container, so that values can be planted in it). */
export const jsonContainer: fc.Arbitrary<object> = fc.oneof(
  fc.array(jsonish, { maxLength: 5 }),
  fc.uniqueArray(fc.tuple(objectKey, jsonish), { maxLength: 5, selector: ([key]) => key }).map((entries) => {
    const object = {};
    for (const [key, value] of entries) setProperty(object, key, value);
    return object;
  }),
);

/** A deep copy of a JSON value, keeping null prototypes and `__proto__` keys. */
export function copyOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyOf);
  if (typeof value !== 'object' || value === null) return value;
  const copy = Object.getPrototypeOf(value) === null ? (Object.create(null) as object) : {};
  for (const [key, item] of Object.entries(value)) setProperty(copy, key, copyOf(item));
  return copy;
}

/** A small seeded PRNG (mulberry32), so one generated integer drives a whole reordering. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The same value rebuilt with every object's keys inserted in another order, at every depth, and some objects
 * switched to (or from) a null prototype. Integer-like keys keep JavaScript's own order, as they always do.
 */
export function reordered(value: unknown, random: () => number): unknown {
  if (Array.isArray(value)) return value.map((item) => reordered(item, random));
  if (typeof value !== 'object' || value === null) return value;
  const keys = Object.keys(value);
  for (let i = keys.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [keys[i], keys[j]] = [keys[j], keys[i]];
  }
  const copy = random() < 0.3 ? (Object.create(null) as object) : {};
  for (const key of keys) setProperty(copy, key, reordered((value as Record<string, unknown>)[key], random));
  return copy;
}

/**
 * Equality of JSON values as JSON sees them, written independently of the library: same keys (any order), same array
 * items in order, numbers by value (so `-0` equals `0`, as JSON writes both `0`), strings code unit by code unit.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const keysA = Object.keys(a).sort();
    const keysB = Object.keys(b).sort();
    return (
      keysA.length === keysB.length &&
      keysA.every(
        (key, i) =>
          key === keysB[i] && jsonEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]),
      )
    );
  }
  return a === b;
}

/**
 * A small edit somewhere in a value: a leaf replaced, a key added or removed, a container wrapped in an array, an
 * array turned into the object with its index keys, a number turned into its string. The result may happen to be
 * equal (a leaf replaced by an equal one); properties compare with {@link jsonEqual}.
 */
export const mutation = fc.record({
  path: fc.array(fc.nat(), { maxLength: 6 }),
  kind: fc.constantFrom('replace', 'addKey', 'removeKey', 'wrap', 'arrayToObject', 'stringify'),
  replacement: leaf,
  key: objectKey,
});

export type Mutation = typeof mutation extends fc.Arbitrary<infer T> ? T : never;

/** `value` with `edit` applied (the value itself is left untouched). */
export function mutate(value: unknown, edit: Mutation, depth = 0): unknown {
  const step = edit.path[depth];
  const isContainer = typeof value === 'object' && value !== null;
  const entries = isContainer ? Object.entries(value as Record<string, unknown>) : [];
  if (step !== undefined && entries.length > 0 && depth < edit.path.length) {
    const [key, child] = entries[step % entries.length];
    const edited = mutate(child, edit, depth + 1);
    if (Array.isArray(value)) return (value as unknown[]).map((item, i) => (String(i) === key ? edited : item));
    const copy = {};
    for (const [k, v] of entries) setProperty(copy, k, k === key ? edited : v);
    return copy;
  }
  switch (edit.kind) {
    case 'addKey': {
      if (Array.isArray(value)) return [...(value as unknown[]), edit.replacement];
      if (!isContainer) return { [edit.key]: value };
      const copy = {};
      for (const [k, v] of entries) setProperty(copy, k, v);
      setProperty(copy, edit.key, edit.replacement);
      return copy;
    }
    case 'removeKey': {
      if (Array.isArray(value)) return value.slice(1);
      if (!isContainer) return null;
      const copy = {};
      for (const [k, v] of entries.slice(1)) setProperty(copy, k, v);
      return copy;
    }
    case 'wrap':
      return [value];
    case 'arrayToObject': {
      if (!Array.isArray(value)) return edit.replacement;
      const copy = {};
      value.forEach((item, i) => setProperty(copy, String(i), item));
      return copy;
    }
    case 'stringify':
      return typeof value === 'number'
        ? String(value)
        : typeof value === 'string'
          ? value.length
          : JSON.stringify(value);
    default:
      return edit.replacement;
  }
}

/** A value that canonical JSON must refuse, with the path suffix the error names (relative to where it is planted). */
export interface BadValue {
  label: string;
  /** The value to plant; `ancestors` are the containers above the spot (outermost first), for cycles. */
  make(ancestors: object[]): unknown;
  /** Appended to the planted path in the expected error path (a hole sits inside the planted array). */
  suffix(depth: number): string;
  /** Only rejected where JSON would drop it silently: never as an object property in whole job data. */
  droppedAsProperty?: boolean;
}

/** Every kind of value canonical JSON rejects. */
export const BAD_VALUES: readonly BadValue[] = [
  { label: 'a function', make: () => () => 1, suffix: () => '' },
  { label: 'a symbol', make: () => Symbol('s'), suffix: () => '' },
  { label: 'a boxed symbol', make: () => Object(Symbol('s')) as object, suffix: () => '' },
  { label: 'a BigInt', make: () => 10n, suffix: () => '' },
  { label: 'a boxed BigInt', make: () => Object(10n) as object, suffix: () => '' },
  { label: 'NaN', make: () => Number.NaN, suffix: () => '' },
  { label: 'Infinity', make: () => Number.POSITIVE_INFINITY, suffix: () => '' },
  { label: '-Infinity', make: () => Number.NEGATIVE_INFINITY, suffix: () => '' },
  { label: 'a boxed NaN', make: () => new Number(Number.NaN), suffix: () => '' },
  { label: 'a Map', make: () => new Map([['a', 1]]), suffix: () => '' },
  { label: 'a Set', make: () => new Set([1]), suffix: () => '' },
  { label: 'a WeakMap', make: () => new WeakMap(), suffix: () => '' },
  { label: 'a WeakSet', make: () => new WeakSet(), suffix: () => '' },
  { label: 'a RegExp', make: () => /a+/g, suffix: () => '' },
  { label: 'an invalid Date', make: () => new Date(Number.NaN), suffix: () => '' },
  { label: 'undefined', make: () => undefined, suffix: () => '', droppedAsProperty: true },
  { label: 'a cycle to the root', make: (ancestors) => ancestors[0], suffix: () => '' },
  { label: 'a cycle to the parent', make: (ancestors) => ancestors[ancestors.length - 1], suffix: () => '' },
  {
    label: 'a sparse array',
    make: () => {
      const sparse: unknown[] = [];
      sparse[2] = 'x';
      return sparse;
    },
    suffix: () => '[0]',
  },
  {
    label: `arrays nested past ${MAX_CANONICAL_DEPTH} levels`,
    make: () => {
      let nested: unknown = 'leaf';
      for (let i = 0; i <= MAX_CANONICAL_DEPTH; i++) nested = [nested];
      return nested;
    },
    // The container that would sit at depth MAX_CANONICAL_DEPTH is refused; `depth` containers are above the spot.
    suffix: (depth) => '[0]'.repeat(MAX_CANONICAL_DEPTH - depth),
  },
];

/** A JSON container with one bad value planted at a generated spot, and the path the error must name. */
export interface Planted {
  value: object;
  bad: BadValue;
  path: string;
  /** Planted as an object property (else as an array item). */
  asProperty: boolean;
}

/**
 * Plants `bad` in a copy of `original` (a JSON container): walks down `steps` through containers, then adds the
 * bad value under `key` (an object) or at a generated index (an array).
 */
export function plant(original: object, steps: number[], key: string, bad: BadValue): Planted {
  // A fresh copy: fast-check may hand the same generated host to several runs while it shrinks.
  const host = copyOf(original) as object;
  const ancestors: object[] = [host];
  let spot: object = host;
  let path = '$';
  for (const step of steps) {
    const children = Object.entries(spot as Record<string, unknown>).filter(
      ([, child]) => typeof child === 'object' && child !== null,
    );
    if (children.length === 0) break;
    const [childKey, child] = children[step % children.length];
    path += Array.isArray(spot) ? `[${childKey}]` : `.${childKey}`;
    spot = child as object;
    ancestors.push(spot);
  }
  const value = bad.make(ancestors);
  const asProperty = !Array.isArray(spot);
  if (Array.isArray(spot)) {
    const index = steps.length % (spot.length + 1);
    spot.splice(index, 0, value);
    path += `[${index}]`;
  } else {
    // (a function under "toJSON" would be called, not refused)
    const name = key === 'toJSON' ? 'toJSON_' : key;
    setProperty(spot, name, value);
    path += `.${name}`;
  }
  return { value: host, bad, path: path + bad.suffix(ancestors.length), asProperty };
}

/**
 * A JSON container with a bad value planted in it. With `undefinedProperties: 'skip'` (whole job data), `undefined` is
 * never planted as an object property: JSON skips those, and so does the digest.
 */
export const planted = (undefinedProperties: 'skip' | 'reject' = 'skip', badValues: readonly BadValue[] = BAD_VALUES) =>
  fc
    .tuple(jsonContainer, fc.array(fc.nat(), { maxLength: 4 }), objectKey, fc.constantFrom(...badValues))
    .map(([host, steps, key, bad]) => plant(host, steps, key, bad))
    .filter(({ bad, asProperty }) => undefinedProperties === 'reject' || !(bad.droppedAsProperty && asProperty));
