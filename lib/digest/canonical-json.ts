import { types } from 'node:util';
import { isThenable } from '../common/function-kind.js';
import { describeThrown } from '../errors/thrown.js';
import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';

/**
 * Deepest nesting of arrays and objects {@link canonicalJson} accepts. A fixed bound, not the call stack, decides, so
 * a producer and a worker (whose stacks differ) always agree on whether lock arguments can be hashed.
 */
export const MAX_CANONICAL_DEPTH = 1000;

/**
 * Serializes a value to JSON whose text depends only on the value: object keys are sorted, so `{a, b}` and `{b, a}`
 * give the same text. Anything JSON would silently drop or mangle (functions, symbols, `undefined` in arrays or at the
 * top, holes of sparse arrays, NaN/Infinity, invalid Dates, BigInt, Map, Set, RegExp), circular structures and nesting
 * deeper than {@link MAX_CANONICAL_DEPTH} are rejected with {@link UnserializableLockArgsError}, because hashing a lossy
 * form would make different jobs collide. `undefined` object properties are skipped, exactly as `JSON.stringify` (and
 * so BullMQ) skips them; values with `toJSON` (Date, Buffer) are serialized through it, and boxed primitives
 * (`new Number(1)`) as their primitive value, both as `JSON.stringify` does. Code of the value that throws while it is
 * read (a getter, a `toJSON`, a Proxy trap, a revoked Proxy) is reported the same way, with the path where it threw
 * and what it threw; only a real stack overflow is reported as nesting too deep for the call stack.
 */
export function canonicalJson(value: unknown, options: CanonicalJsonOptions = {}): string {
  try {
    return write(value, '$', new Set<object>(), options.undefinedProperties === 'reject', 0);
  } catch (error) {
    if (isStackOverflow(error)) {
      throw new UnserializableLockArgsError('$', 'nested too deeply to serialize (the call stack ran out)');
    }
    throw typed(error, '$');
  }
}

/** Whether `error` is V8's stack overflow (what a user's own `RangeError` is not). */
function isStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && error.message === 'Maximum call stack size exceeded';
}

/**
 * What the value's own code threw (at `path`) as an {@link UnserializableLockArgsError}; one already typed, or a stack
 * overflow (reported once, at the top), as it is.
 */
function typed(error: unknown, path: string): unknown {
  if (error instanceof UnserializableLockArgsError || isStackOverflow(error)) return error;
  const { name, message } = describeThrown(error);
  return new UnserializableLockArgsError(path, `reading it threw ${name}: ${message}`);
}

/** Options of {@link canonicalJson}. */
export interface CanonicalJsonOptions {
  /** `'skip'` (default): drop `undefined` object properties as JSON does; `'reject'`: treat them as errors. */
  undefinedProperties?: 'skip' | 'reject';
}

/** Serializes `value` (found at `path`, inside `depth` arrays and objects); `toJSON` is applied once, as JSON does. */
function write(value: unknown, path: string, seen: Set<object>, strict: boolean, depth: number): string {
  if (typeof value === 'object' && value !== null) {
    if (types.isDate(value) && !Number.isFinite(Date.prototype.getTime.call(value))) {
      throw new UnserializableLockArgsError(path, 'an invalid Date (JSON writes it as null)');
    }
    let json: { value: unknown } | undefined;
    try {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') json = { value: toJSON.call(value) };
    } catch (error) {
      throw typed(error, path);
    }
    if (json) return writeValue(json.value, path, seen, strict, depth);
  }
  return writeValue(value, path, seen, strict, depth);
}

function writeValue(value: unknown, path: string, seen: Set<object>, strict: boolean, depth: number): string {
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
  // `new Number(1)` is written as 1, like JSON does (else every boxed number would hash as {}).
  if (types.isBoxedPrimitive(object)) return writeValue(unbox(object), path, seen, strict, depth);
  if (seen.has(object)) throw new UnserializableLockArgsError(path, 'circular structure');
  // From here the value's own code may run (getters, Proxy traps): what it throws is reported at `at`.
  let at = path;
  try {
    const lossy = lossyObject(object);
    if (lossy) throw new UnserializableLockArgsError(path, lossy);
    if (depth >= MAX_CANONICAL_DEPTH) {
      throw new UnserializableLockArgsError(path, `nested deeper than ${MAX_CANONICAL_DEPTH} arrays and objects`);
    }
    seen.add(object);
    try {
      if (Array.isArray(object)) {
        const items: string[] = [];
        for (let i = 0; i < object.length; i++) {
          at = `${path}[${i}]`;
          if (!Object.hasOwn(object, i)) {
            throw new UnserializableLockArgsError(at, 'a hole in a sparse array (JSON writes it as null)');
          }
          items.push(write(object[i], at, seen, strict, depth + 1));
        }
        return `[${items.join(',')}]`;
      }
      const parts: string[] = [];
      for (const key of Object.keys(object).sort()) {
        at = `${path}.${key}`;
        const item = (object as Record<string, unknown>)[key];
        if (item === undefined && !strict) continue;
        parts.push(`${JSON.stringify(key)}:${write(item, at, seen, strict, depth + 1)}`);
      }
      return `{${parts.join(',')}}`;
    } finally {
      seen.delete(object);
    }
  } catch (error) {
    throw typed(error, at);
  }
}

/**
 * Why an object that is not plain data would be hashed lossily (JSON would write it as `{}` or drop what makes it
 * what it is), or `undefined` when its own enumerable properties are its data: plain objects, arrays, and instances of
 * classes that keep their data in own fields (DTOs), as JSON and so BullMQ store them.
 */
function lossyObject(object: object): string | undefined {
  if (types.isProxy(object)) {
    return 'a Proxy: what it shows is not its own data (JSON may write it as {}); return plain data';
  }
  if (isThenable(object)) {
    return 'a Promise (a thenable): lockArgs must be synchronous and return the value itself, not a Promise';
  }
  if (object instanceof Map || object instanceof Set || object instanceof WeakMap || object instanceof WeakSet) {
    return `${object.constructor.name} has no JSON form; convert it to an array`;
  }
  if (object instanceof RegExp) return 'RegExp has no JSON form';
  if (object instanceof Error) return `an Error (${object.name}) has no JSON form; pick its fields (e.g. its message)`;
  if (types.isAnyArrayBuffer(object) || ArrayBuffer.isView(object)) {
    return `binary data (${object.constructor.name}) has no plain JSON form; convert it to an array or a string`;
  }
  if (object instanceof WeakRef) return 'a WeakRef cannot be hashed; pass what it refers to';
  if (
    Object.getOwnPropertySymbols(object).some((symbol) => Object.prototype.propertyIsEnumerable.call(object, symbol))
  ) {
    return 'symbol-keyed properties have no JSON form (JSON drops them); use string keys';
  }
  const prototype: unknown = Object.getPrototypeOf(object);
  const plain = prototype === Object.prototype || prototype === null || Array.isArray(object);
  if (!plain && Object.keys(object).length === 0) {
    const name = (object.constructor as { name?: string } | undefined)?.name ?? 'an object';
    return `an instance of ${name} with no own data (JSON would write it as {}); return plain data`;
  }
  return undefined;
}

/** The primitive inside a boxed primitive (`new Number(1)` → 1), read from its internal slot, as JSON does. */
function unbox(object: object): unknown {
  if (types.isNumberObject(object)) return Number.prototype.valueOf.call(object);
  if (types.isStringObject(object)) return String.prototype.valueOf.call(object);
  if (types.isBooleanObject(object)) return Boolean.prototype.valueOf.call(object);
  if (types.isBigIntObject(object)) return BigInt.prototype.valueOf.call(object);
  return Symbol.prototype.valueOf.call(object);
}
