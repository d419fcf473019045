import { jsonText } from '../../../common/json-text.js';
import { cut } from '../../../errors/thrown.js';
import { html, type SafeHtml } from './html.js';
import { cutText } from './text.js';

/** A time as `2025-01-31 12:00:00Z` plus how long ago (or ahead) it is. */
export function formatTime(ms: number | undefined, now = Date.now()): SafeHtml {
  if (ms === undefined || !Number.isFinite(ms)) return html`<span class="muted">—</span>`;
  const iso = new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
  const delta = ms - now;
  const relative = delta <= 0 ? `${formatDuration(-delta)} ago` : `in ${formatDuration(delta)}`;
  return html`<time datetime="${new Date(ms).toISOString()}">${iso}</time> <span class="muted">(${relative})</span>`;
}

/** A duration in words: `850ms`, `42s`, `3m 05s`, `2h 10m`, `3d 4h`. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** Longest JSON rendered in a `<pre>` before it is cut (the API has it whole). */
const MAX_JSON = 20_000;

/**
 * A value as indented JSON in a `<pre>` (escaped; cut after 20 000 characters, written no further: a value of any size
 * or nesting costs bounded time, see {@link jsonText}).
 */
export function jsonBlock(value: unknown): SafeHtml {
  let text: string;
  let wasCut: boolean;
  try {
    ({ text, cut: wasCut } = jsonText(value, { indent: 2, maxChars: MAX_JSON }));
  } catch {
    text = String(value);
    wasCut = text.length > MAX_JSON;
  }
  // Cut where a surrogate pair is never split (a lone half would show as a replacement character).
  return html`<pre class="json">${wasCut ? cut(text, MAX_JSON) : text}</pre>
    ${wasCut ? html`<p class="muted">Cut at ${MAX_JSON} characters; the JSON API returns it whole.</p>` : ''}`;
}

/** Stored JSON text (an idempotency result or error) pretty-printed when it parses, as is (cut) otherwise. */
export function storedJson(text: string | undefined): SafeHtml {
  if (text === undefined) return html`<span class="muted">—</span>`;
  try {
    return jsonBlock(JSON.parse(text));
  } catch {
    return html`<pre class="json">${cutText(text, MAX_JSON)}</pre>`;
  }
}

/** A BullMQ job state as a coloured badge. */
export function stateBadge(state: string | undefined): SafeHtml {
  if (state === undefined) return html`<span class="muted">—</span>`;
  const known = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed', 'missing'];
  const cls = known.includes(state) ? `state-${state}` : 'state-unknown';
  return html`<span class="badge ${cls}">${state}</span>`;
}

/** A digest shortened for a table cell (the full digest in the title and the link). */
export function shortDigest(digest: string): string {
  return digest.length > 22 ? `${digest.slice(0, 19)}…` : digest;
}
