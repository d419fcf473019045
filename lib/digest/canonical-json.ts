import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';

/**
 * Serializes a value to JSON whose text depends only on the value: object keys are sorted, so `{a, b}` and `{b, a}`
 * give the same text. Anything JSON would silently drop or mangle (functions, symbols, `undefined` in arrays or at the
 * top, NaN/Infinity, BigInt, Map, Set, RegExp) and circular structures are rejected with
 * {@link UnserializableLockArgsError}, because hashing a lossy form would make different jobs collide.
 * `undefined` object properties are skipped, exactly as `JSON.stringify` (and so BullMQ) skips them, and values with
 * `toJSON` (Date, Buffer) are serialized through it.
 */
export function canonicalJson(value: unknown, options: CanonicalJsonOptions = {}): string {
  try {
    return write(value, '$', new Set<object>(), options.undefinedProperties === 'reject');
  } catch (error) {
    if (error instanceof RangeError) {
      throw new UnserializableLockArgsError('$', 'nested too deeply to serialize (JSON.stringify fails here too)');
    }
    throw error;
  }
}

/** Options of {@link canonicalJson}. */
export interface CanonicalJsonOptions {
  /** `'skip'` (default): drop `undefined` object properties as JSON does; `'reject'`: treat them as errors. */
  undefinedProperties?: 'skip' | 'reject';
}

function write(value: unknown, path: string, seen: Set<object>, strict: boolean): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new UnserializableLockArgsError(path, `${value} is not a finite number`);
      return JSON.stringify(value);
    case 'bigint':
      throw new UnserializableLockArgsError(path, 'BigInt has no JSON form; convert it to a string');
    case 'function':
      throw new UnserializableLockArgsError(path, 'a function cannot be hashed');
    case 'symbol':
      throw new UnserializableLockArgsError(path, 'a symbol cannot be hashed');
    case 'undefined':
      throw new UnserializableLockArgsError(path, 'undefined (a missing field?) cannot be hashed; use null');
  }
  if (value === null) return 'null';
  const object = value as object;
  if (seen.has(object)) throw new UnserializableLockArgsError(path, 'circular structure');
  if (object instanceof Map || object instanceof Set || object instanceof WeakMap || object instanceof WeakSet) {
    throw new UnserializableLockArgsError(path, `${object.constructor.name} has no JSON form; convert it to an array`);
  }
  if (object instanceof RegExp) throw new UnserializableLockArgsError(path, 'RegExp has no JSON form');
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return write(toJSON.call(object), path, seen, strict);
  seen.add(object);
  try {
    if (Array.isArray(object)) {
      return `[${object.map((item, i) => write(item, `${path}[${i}]`, seen, strict)).join(',')}]`;
    }
    const parts: string[] = [];
    for (const key of Object.keys(object).sort()) {
      const item = (object as Record<string, unknown>)[key];
      if (item === undefined && !strict) continue;
      parts.push(`${JSON.stringify(key)}:${write(item, `${path}.${key}`, seen, strict)}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    seen.delete(object);
  }
}
