/**
 * Escaping for the admin page's server-rendered HTML. Every view is a function returning {@link SafeHtml} built with
 * the {@link html} tag, which HTML-escapes every interpolated value unless it is itself `SafeHtml` (the output of
 * another `html` template). No other way to produce `SafeHtml` exists outside this file, so user data (job ids, names,
 * data, digests, error messages) can only reach the page escaped.
 */
import { BIDI_CLASS, escapedChar } from '../../../common/bidi.js';
import { withoutTrailingSlashes } from '../../../common/slashes.js';

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
  '=': '&#61;',
};

/** HTML-escapes a value for text and for quoted attribute values. `null`/`undefined` become the empty string. */
export function escapeHtml(value: string | number | boolean | bigint | null | undefined): string {
  if (value === undefined || value === null) return '';
  return String(value).replace(/[&<>"'`=]/g, (char) => ENTITIES[char]);
}

let createSafeHtml: (markup: string) => SafeHtml;

/** A fragment of HTML that is safe to emit as is: only {@link html} creates one. */
export class SafeHtml {
  readonly #markup: string;

  private constructor(markup: string) {
    this.#markup = markup;
  }

  static {
    createSafeHtml = (markup) => new SafeHtml(markup);
  }

  toString(): string {
    return this.#markup;
  }
}

/** A value that may appear in an {@link html} template: escaped unless `SafeHtml`; arrays are concatenated. */
export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

/** The bidirectional formatting characters, shown as `\uXXXX` in the page's text (see {@link BIDI_CLASS}). */
const BIDI = new RegExp(`[${BIDI_CLASS}]`, 'g');

function render(value: HtmlValue, inText: boolean): string {
  if (value instanceof SafeHtml) return value.toString();
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map((item) => render(item, inText)).join('');
  if (value === false) return '';
  const escaped = escapeHtml(value as string | number | true | null | undefined);
  // In the page's text only: an attribute value (a form field, a link) must keep what it names exactly.
  return inText ? escaped.replace(BIDI, escapedChar) : escaped;
}

/**
 * Template tag: `html\`<td>${jobId}</td>\`` escapes `jobId`; nested `html` fragments and arrays of them pass through.
 * A value in the page's text (not inside a tag) also shows its bidirectional formatting characters as `\uXXXX`: a job
 * id `inv<U+202E>exe.fdp` would read `invpdf.exe` in its cell.
 */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): SafeHtml {
  let markup = strings[0];
  values.forEach((value, i) => {
    markup += render(value, markup.lastIndexOf('<') <= markup.lastIndexOf('>')) + strings[i + 1];
  });
  return createSafeHtml(markup);
}

/**
 * The content of a `<style>` element, which HTML does not unescape (entities stay literal there), so it cannot go
 * through {@link html}'s escaping. Refuses any `<`, so the text can never close the element or open another.
 */
export function styleSheet(css: string): SafeHtml {
  if (css.includes('<')) throw new Error('a style sheet must not contain "<"');
  return createSafeHtml(css);
}

/**
 * A URL for an `href`/`action` attribute: a path built from the admin base and path segments, each segment
 * percent-encoded, plus an optional query (values percent-encoded). Always starts with `/`, so no `javascript:` URL can
 * come out of it. The result still goes through {@link html}'s escaping.
 */
export function adminUrl(
  base: string,
  segments: readonly string[] = [],
  query: Readonly<Record<string, string | number | undefined>> = {},
): string {
  const path =
    [withoutTrailingSlashes(base), ...segments.map((segment) => encodeURIComponent(segment))].join('/') || '/';
  const params = Object.entries(query).filter((entry): entry is [string, string | number] => entry[1] !== undefined);
  const search = params.length
    ? `?${new URLSearchParams(params.map(([k, v]): [string, string] => [k, String(v)])).toString()}`
    : '';
  // One leading slash, never two: `//host` would leave the site.
  return `/${path.replace(/^\/+/, '')}${search}`;
}
