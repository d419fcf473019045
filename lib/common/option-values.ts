import { cut } from '../errors/thrown.js';

/**
 * Longest delay Node's timers accept (2^31 − 1 ms, about 24.8 days). A longer one overflows: `setTimeout` and
 * `setInterval` then fire after 1 ms, every millisecond. Every option that becomes a timer is bounded by it.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** Whether a value is an object (not null, not an array, not a function). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A copy without the properties whose value is `undefined` (so they do not override defaults). */
export function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * What is wrong with an integer option, or `undefined` when it is valid: a safe integer ≥ `min`, and ≤ `max` when
 * given. `unit` is said in the message (`' (milliseconds)'`).
 */
export function integerProblem(value: unknown, min: number, max?: number, unit = ''): string | undefined {
  const got = `(got ${describeOptionValue(value)})`;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    return `must be an integer ≥ ${min}${unit} ${got}`;
  }
  if (max !== undefined && value > max) {
    const why = max === MAX_TIMER_MS ? " (the longest delay Node's timers allow)" : '';
    return `must be at most ${max}${unit}${why} ${got}`;
  }
  return undefined;
}

/** Longest form of a value (or a name) an option error shows (UTF-16 code units). */
const SHOWN = 80;

/**
 * `text` as an option error shows it: whole up to 80 UTF-16 code units, else cut (`…` marks the cut) and followed by
 * its length, so a malformed option of a megabyte gives a message of a line.
 */
export function shortened(text: string): string {
  return text.length <= SHOWN ? text : `${cut(text, SHOWN)} (${text.length} characters)`;
}

/**
 * A value as option errors show it: JSON where it has a JSON form, else what it is, cut to 80 UTF-16 code units (see
 * {@link shortened}). Never throws, whatever the value (BigInt, symbols, circular objects), so a malformed option
 * always gets its InvalidUniqueJobOptionsError.
 */
export function describeOptionValue(value: unknown): string {
  try {
    switch (typeof value) {
      case 'string':
        return shortened(JSON.stringify(value));
      case 'bigint':
        return shortened(`${value}n`);
      case 'symbol':
        return shortened(value.toString());
      case 'function':
        return 'a function';
      case 'object':
        break;
      default:
        return String(value);
    }
    if (value === null) return 'null';
    const json = JSON.stringify(value);
    if (json !== undefined) return shortened(json);
  } catch {
    // circular, a throwing toJSON or getter: say what it is instead
  }
  return Array.isArray(value) ? 'an array' : 'an object';
}
