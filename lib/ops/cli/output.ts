import { cut } from '../../errors/thrown.js';
import { jsonText } from '../../common/json-text.js';
import { BIDI_CLASS, escapedChar } from '../../common/bidi.js';
/** Where the CLI writes, and its environment (a parameter, so tests and embedders can run it in process). */
export interface CliIo {
  /** Writes to standard output (a whole line or block, without the final newline). */
  out(text: string): void;
  /** Writes to standard error. */
  err(text: string): void;
  /** The environment (REDIS_URL). */
  env: Readonly<Record<string, string | undefined>>;
}

/** The process's streams and environment. */
export const processIo: CliIo = {
  out: (text) => void process.stdout.write(`${text}\n`),
  err: (text) => void process.stderr.write(`${text}\n`),
  env: process.env,
};

/** What {@link toJson} escapes besides what JSON does: C1 controls, U+2028/U+2029 and the bidi characters. */
const UNSAFE_IN_JSON = new RegExp(`[\\u007f-\\u009f\\u2028\\u2029${BIDI_CLASS}]`, 'g');
/** What {@link clean} escapes: every control character, U+2028/U+2029 and the bidi characters. */
const UNSAFE_IN_TEXT = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029${BIDI_CLASS}]`, 'g');

/**
 * JSON for the terminal: as `JSON.stringify` indented (the first levels only, see {@link jsonText}: deeply nested job
 * data would otherwise make the text hundreds of times its size), with the C1 control characters (U+007F–U+009F, which
 * JSON leaves raw and some terminals obey) and the bidirectional formatting characters escaped too. Data read from
 * Redis (job names, job data) may hold anything.
 */
export function toJson(value: unknown): string {
  return jsonText(value, { indent: 2 }).text.replace(UNSAFE_IN_JSON, escapedChar);
}

/**
 * Text from Redis made safe for a terminal: control characters (escape sequences, newlines) and bidirectional
 * formatting characters shown as `\uXXXX`.
 */
export function clean(text: string | number | undefined): string {
  if (text === undefined) return '-';
  return String(text).replace(UNSAFE_IN_TEXT, escapedChar);
}

/** Shortens text to `max` characters (`…` marks the cut; a surrogate pair is never split). */
export function truncate(text: string, max: number): string {
  return cut(text, max);
}

/** A table: a header row and rows, columns padded to their widest cell. Cells must be {@link clean} already. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** A duration in words: `850ms`, `12s`, `5m 3s`, `2h 10m`, `3d 4h`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** How long ago a time was (`-` when unknown). */
export function ago(at: number | undefined, now = Date.now()): string {
  return at === undefined ? '-' : `${duration(now - at)} ago`;
}

/** A time as ISO 8601 (`-` when unknown). */
export function iso(at: number | undefined): string {
  const date = typeof at === 'number' && Number.isFinite(at) ? new Date(at) : undefined;
  return date && !Number.isNaN(date.getTime()) ? date.toISOString() : '-';
}
