import { DIGEST_VERSION } from '../../digest/digest.js';
import { InvalidDigestError } from './errors/invalid-digest.error.js';

/** A complete lock digest: a version (`v1`), a colon and a sha256 in lowercase hex. */
const DIGEST = /^v\d+:[0-9a-f]{64}$/;
const HEX = /^[0-9a-f]+$/;
/** A prefix of a digest: `v`, `v1`, `v1:`, `v1:ab…`, or a bare hex prefix. */
const DIGEST_PREFIX = /^(v(\d+(:[0-9a-f]{0,64})?)?)?$/;
/** A glob over digests: only the characters of a digest, `*` and `?`. */
const DIGEST_GLOB = /^[v0-9a-f:*?]+$/;

/** Whether `value` is a complete lock digest (`v1:` + 64 lowercase hex characters). */
export function isLockDigest(value: unknown): value is string {
  return typeof value === 'string' && DIGEST.test(value);
}

/**
 * Checks a digest given by a user (a CLI argument, a URL) and returns it in the form keys use. Accepts `v1:<64 hex>`
 * or the bare 64 hex characters (meaning the current version); uppercase hex is lowered.
 *
 * @throws InvalidDigestError when it is anything else.
 */
export function parseLockDigest(value: string): string {
  const text = String(value).trim().toLowerCase();
  const full = HEX.test(text) ? `${DIGEST_VERSION}:${text}` : text;
  if (!DIGEST.test(full)) {
    throw new InvalidDigestError(
      `Invalid digest ${JSON.stringify(truncate(value))}: a digest is "${DIGEST_VERSION}:" followed by 64 hex characters (0-9, a-f)`,
    );
  }
  return full;
}

/**
 * Checks a digest prefix given by a user; returns it in the form keys use (a bare hex prefix gets `v1:` in front).
 *
 * @throws InvalidDigestError when it cannot begin a digest.
 */
export function parseDigestPrefix(value: string): string {
  const text = String(value).trim().toLowerCase();
  const full = HEX.test(text) ? `${DIGEST_VERSION}:${text}` : text;
  if (!DIGEST_PREFIX.test(full) || full.length > DIGEST_VERSION.length + 65) {
    throw new InvalidDigestError(
      `Invalid digest prefix ${JSON.stringify(truncate(value))}: it must be hex (0-9, a-f), optionally after "${DIGEST_VERSION}:"`,
    );
  }
  return full;
}

/**
 * Checks a glob over digests given by a user (`*` any characters, `?` one; otherwise hex, `v`, digits and `:`). A
 * pattern starting with hex gets `v1:` in front, and runs of `*` become one `*` (same matches). The result is safe in
 * a Redis `SCAN MATCH` pattern; match digests against it with {@link digestPatternMatcher}, never a regular
 * expression (which backtracks exponentially on patterns such as `***************v*`).
 *
 * @throws InvalidDigestError for any other character, or a pattern longer than 200 characters.
 */
export function parseDigestPattern(value: string): string {
  const text = String(value).trim().toLowerCase();
  if (!DIGEST_GLOB.test(text) || text.length > 200) {
    throw new InvalidDigestError(
      `Invalid digest pattern ${JSON.stringify(truncate(value))}: use hex (0-9, a-f), "${DIGEST_VERSION}:", "*" and "?"`,
    );
  }
  const collapsed = collapseStars(text);
  return /^[0-9a-f]/.test(collapsed) ? `${DIGEST_VERSION}:${collapsed}` : collapsed;
}

/** The pattern with every run of `*` replaced by one `*` (the same set of matches, less work for any matcher). */
export function collapseStars(pattern: string): string {
  return pattern.replace(/\*{2,}/g, '*');
}

/**
 * A predicate telling whether a digest matches a glob from {@link parseDigestPattern} (`*` any run of characters,
 * including none; `?` exactly one; any other character itself).
 *
 * It never backtracks beyond the last `*` seen (the classic two-pointer wildcard matcher), so one test costs at most
 * pattern length × text length steps whatever the pattern: a pattern such as `***************v*` or
 * `*a*a*a*a*a*a*a*a*b`, which makes a backtracking regular expression take minutes, is answered in microseconds.
 */
export function digestPatternMatcher(pattern: string): (text: string) => boolean {
  const glob = collapseStars(pattern);
  return (text) => globMatches(glob, text);
}

/**
 * Greedy wildcard matching: advance through both strings; at a `*` remember where it was and match it empty; on a
 * mismatch go back to just after the last `*` and let it swallow one more character of the text. Once a later `*` is
 * reached, an earlier one never needs to grow again (the later one can absorb whatever it would), so the text position
 * only moves forward and the work is bounded by pattern length × text length.
 */
function globMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1; // index of the last `*` in the pattern, -1 before any
  let resume = 0; // where in the text that `*` stopped swallowing
  while (t < text.length) {
    if (p < pattern.length && (pattern[p] === '?' || (pattern[p] !== '*' && pattern[p] === text[t]))) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = t;
    } else if (star !== -1) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

function truncate(value: unknown): string {
  const text = String(value);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
