/**
 * The bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), as a character class
 * body: invisible, they reorder the text after them where it is shown (a terminal or pager that applies the Unicode
 * bidi algorithm, a browser, a pasted ticket), so a job id `inv<U+202E>exe.fdp` reads `invpdf.exe`.
 */
export const BIDI_CLASS = '\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';

/** `\uXXXX` for a character: how the operator surfaces show one they must not print as it is. */
export function escapedChar(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}
