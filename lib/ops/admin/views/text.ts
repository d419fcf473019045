import { cut } from '../../../errors/thrown.js';
import { html, type SafeHtml } from './html.js';

/**
 * Free text read from Redis (job names and ids, failure reasons, log lines, dead-set reasons) as the pages show it:
 * cut, like job data (`jsonBlock`), so that a value of any size costs a page bounded bytes and time. The JSON API
 * returns every such value whole.
 */

/** Longest job name, job id or queue shown (characters). */
export const MAX_NAME = 200;
/** Longest failure reason or dead-set reason shown (characters). */
export const MAX_REASON = 2_000;
/** Longest log line shown (characters). */
export const MAX_LOG_LINE = 2_000;
/** Most characters of log lines shown per job, all lines together. */
export const MAX_LOG = 20_000;

/** `text` cut to `max` characters (default {@link MAX_NAME}; `…` marks the cut), for an attribute or a cell. */
export function shortened(text: string, max = MAX_NAME): string {
  return cut(text, max);
}

/** The words after a value the page cut. */
function cutNote(max: number): SafeHtml {
  return html`<span class="muted cut"> (cut at ${max} characters; the JSON API returns it whole)</span>`;
}

/**
 * A text cut to `max` characters (a surrogate pair is never split; `…` marks the cut), then escaped. `note`: say in
 * words that it was cut and where the whole value is; without it the `…` alone marks the cut (names and ids in
 * tables).
 */
export function cutText(text: string | undefined, max: number, note = true): SafeHtml {
  if (text === undefined) return html``;
  if (text.length <= max) return html`${text}`;
  return html`${cut(text, max)}${note ? cutNote(max) : ''}`;
}

/**
 * A job's log lines in a `<pre>`: each line cut to {@link MAX_LOG_LINE} characters, and no more lines than fit
 * {@link MAX_LOG} characters together (the newest kept, as the log is read from its end), with a line saying what was
 * cut.
 */
export function logBlock(lines: readonly string[]): SafeHtml {
  const shown: string[] = [];
  let total = 0;
  let cutLines = 0;
  for (let i = lines.length - 1; i >= 0; i--) {
    const long = lines[i].length > MAX_LOG_LINE;
    const line = long ? cut(lines[i], MAX_LOG_LINE) : lines[i];
    if (total + line.length > MAX_LOG && shown.length > 0) break;
    shown.push(line);
    total += line.length + 1;
    if (long) cutLines++;
  }
  shown.reverse();
  const left = lines.length - shown.length;
  const notes = [
    ...(cutLines > 0 ? [`${cutLines} line${cutLines === 1 ? '' : 's'} cut at ${MAX_LOG_LINE} characters`] : []),
    ...(left > 0 ? [`${left} older line${left === 1 ? '' : 's'} left out (${MAX_LOG} characters shown at most)`] : []),
  ];
  return html`<pre class="json logs">${shown.join('\n')}</pre>
    ${notes.length ? html`<p class="muted cut">${notes.join('; ')}; the JSON API returns the log whole.</p>` : ''}`;
}
