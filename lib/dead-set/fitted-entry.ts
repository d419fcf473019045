import { cut } from '../errors/thrown.js';
import type { DeadSetEntry } from './dead-set-entry.interface.js';

/** Shortest a string field of an entry is cut to (UTF-16 code units, the `…` included). */
const MIN_FIELD = 8;
/** The string fields of an entry that may be cut to fit `maxEntryBytes` (what the library writes is short). */
const CUTTABLE = ['reason', 'existingJobId', 'jobId', 'jobName', 'queue', 'bullPrefix', 'digest'] as const;

/**
 * The JSON of a truncated entry (no payload), its longest string fields cut (`…` marks a cut) so that it is at most
 * `maxBytes`: each field gets an even share of what the other fields leave, none is cut below {@link MIN_FIELD}
 * characters (so an entry may stay over a bound of a few hundred bytes; the store refuses it if it is over `maxBytes`).
 */
export function fitted(entry: DeadSetEntry, maxBytes: number): string {
  const json = JSON.stringify(entry);
  if (Buffer.byteLength(json) <= maxBytes) return json;
  const fields = CUTTABLE.filter((field) => typeof entry[field] === 'string');
  const sizes = new Map(fields.map((field) => [field, jsonBytes(entry[field] as string)]));
  const fixed = Buffer.byteLength(json) - [...sizes.values()].reduce((sum, size) => sum + size, 0);
  // Water-filling: the smallest fields keep what they have; the others share the rest evenly.
  let budget = maxBytes - fixed;
  let left = fields.length;
  let share = 0;
  for (const field of [...fields].sort((a, b) => sizes.get(a)! - sizes.get(b)!)) {
    share = Math.floor(Math.max(0, budget) / left);
    if (sizes.get(field)! > share) break;
    budget -= sizes.get(field)!;
    left -= 1;
  }
  const bounded: DeadSetEntry = { ...entry };
  for (const field of fields) {
    if (sizes.get(field)! > share) bounded[field] = cutToBytes(entry[field] as string, share);
  }
  return JSON.stringify(bounded);
}

/** Bytes of a string's JSON form, quotes included. */
function jsonBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}

/** `text` cut (with `cut`, so ending with `…`) to the longest prefix whose JSON form is at most `max` bytes. */
function cutToBytes(text: string, max: number): string {
  let low = MIN_FIELD;
  let high = text.length - 1;
  if (jsonBytes(cut(text, low)) > max) return cut(text, low);
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (jsonBytes(cut(text, middle)) <= max) low = middle;
    else high = middle - 1;
  }
  return cut(text, low);
}
