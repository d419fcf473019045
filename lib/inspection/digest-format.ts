import { DIGEST_VERSION } from '../digest/digest.js';
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
 * pattern starting with hex gets `v1:` in front. The result is safe in a Redis `SCAN MATCH` pattern.
 *
 * @throws InvalidDigestError for any other character.
 */
export function parseDigestPattern(value: string): string {
  const text = String(value).trim().toLowerCase();
  if (!DIGEST_GLOB.test(text) || text.length > 200) {
    throw new InvalidDigestError(
      `Invalid digest pattern ${JSON.stringify(truncate(value))}: use hex (0-9, a-f), "${DIGEST_VERSION}:", "*" and "?"`,
    );
  }
  return /^[0-9a-f]/.test(text) ? `${DIGEST_VERSION}:${text}` : text;
}

/** A regular expression matching the digests a pattern from {@link parseDigestPattern} matches. */
export function digestPatternRegExp(pattern: string): RegExp {
  const source = [...pattern].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c)).join('');
  return new RegExp(`^${source}$`);
}

function truncate(value: unknown): string {
  const text = String(value);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
