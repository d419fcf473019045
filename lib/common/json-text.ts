/** Options of {@link jsonText}. */
export interface JsonTextOptions {
  /** Spaces per nesting level (0: compact, as `JSON.stringify(value)`). Default 0. */
  readonly indent?: number;
  /**
   * Nesting levels whose items are written on lines of their own; the items of deeper arrays and objects are written
   * compact, so that the indentation (and so the text) does not grow with the nesting. Default 16.
   */
  readonly indentDepth?: number;
  /** Characters after which writing stops: the text is cut there. Default: none. */
  readonly maxChars?: number;
}

/** The text {@link jsonText} wrote, and whether it was cut at `maxChars`. */
export interface JsonText {
  readonly text: string;
  readonly cut: boolean;
}

/** Written in place of a value JSON leaves out (`undefined`, a function, a symbol) at the top. */
const NO_JSON = 'undefined';

interface Frame {
  readonly container: object;
  readonly keys: readonly string[] | undefined;
  readonly length: number;
  readonly depth: number;
  readonly pretty: boolean;
  index: number;
  wrote: boolean;
}

/**
 * A value as JSON text, for display: the text of `JSON.stringify(value, null, indent)` as long as the nesting is at
 * most `indentDepth` levels (deeper values compact), cut at `maxChars`. Unlike `JSON.stringify` with an indent, whose
 * text grows with the square of the nesting (every line indented by its depth), the text is at most a few characters
 * per item plus `indentDepth × indent` per line, and with `maxChars` the work stops there: a value of any size or depth
 * read from Redis (job data, a dead-set entry) costs bounded time to show. Written without recursion, so no nesting
 * exhausts the stack. Circular structures and BigInt throw a `TypeError`, as `JSON.stringify` does.
 */
export function jsonText(value: unknown, options: JsonTextOptions = {}): JsonText {
  const indent = options.indent ?? 0;
  const indentDepth = options.indentDepth ?? 16;
  const maxChars = options.maxChars ?? Number.POSITIVE_INFINITY;
  const parts: string[] = [];
  let length = 0;
  const write = (text: string): void => {
    parts.push(text);
    length += text.length;
  };
  const ancestors = new Set<object>();
  const stack: Frame[] = [];
  const open = (container: object, depth: number): void => {
    if (ancestors.has(container)) throw new TypeError('Converting circular structure to JSON');
    ancestors.add(container);
    const keys = Array.isArray(container) ? undefined : Object.keys(container);
    const size = keys ? keys.length : (container as unknown[]).length;
    const pretty = indent > 0 && depth < indentDepth;
    stack.push({ container, keys, length: size, depth, pretty, index: 0, wrote: false });
    write(keys ? '{' : '[');
  };
  const lineAt = (depth: number) => `\n${' '.repeat(indent * depth)}`;

  const top = prepared(value, '');
  const first = scalarText(top);
  if (first === undefined) return { text: NO_JSON, cut: false };
  if (first === CONTAINER) open(top as object, 0);
  else write(first);

  while (stack.length > 0 && length < maxChars) {
    const frame = stack[stack.length - 1];
    if (frame.index >= frame.length) {
      stack.pop();
      ancestors.delete(frame.container);
      write(`${frame.wrote && frame.pretty ? lineAt(frame.depth) : ''}${frame.keys ? '}' : ']'}`);
      continue;
    }
    const index = frame.index++;
    const key = frame.keys ? frame.keys[index] : String(index);
    const item = prepared((frame.container as Record<string, unknown>)[key], key);
    const text = scalarText(item);
    if (text === undefined && frame.keys) continue; // JSON leaves the member out
    const separator = `${frame.wrote ? ',' : ''}${frame.pretty ? lineAt(frame.depth + 1) : ''}`;
    const label = frame.keys ? `${JSON.stringify(key)}${frame.pretty ? ': ' : ':'}` : '';
    frame.wrote = true;
    if (text === CONTAINER) {
      write(separator + label);
      open(item as object, frame.depth + 1);
    } else {
      write(separator + label + (text ?? 'null'));
    }
  }
  const whole = parts.join('');
  const cut = stack.length > 0 || whole.length > maxChars;
  if (!cut) return { text: whole, cut };
  // Never half of a surrogate pair at the end (a lone half shows as a replacement character).
  const end = isHighSurrogate(whole.charCodeAt(maxChars - 1)) ? maxChars - 1 : maxChars;
  return { text: whole.slice(0, end), cut };
}

const CONTAINER = Symbol('container');

/** The text of a scalar, {@link CONTAINER} for an array or object, `undefined` for what JSON leaves out. */
function scalarText(value: unknown): string | typeof CONTAINER | undefined {
  switch (typeof value) {
    case 'string':
    case 'number':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
    case 'object':
      return value === null ? 'null' : CONTAINER;
    default:
      return undefined;
  }
}

/** The value JSON writes for `value` under `key`: through its `toJSON`, boxed primitives unboxed. */
function prepared(value: unknown, key: string): unknown {
  let result = value;
  if (typeof result === 'object' && result !== null) {
    const toJSON = (result as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') result = (toJSON as (key: string) => unknown).call(result, key);
  }
  if (result instanceof Number) return Number(result);
  if (result instanceof String) return String(result);
  if (result instanceof Boolean) return result.valueOf();
  return result;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
