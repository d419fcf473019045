import { hash } from 'node:crypto';
import { ownQueuePrefix } from '../redis/keys.js';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency-options.js';
import type { IdempotencyRecord } from './idempotency-store.interface.js';

/** The start of every hashed key or scope as stored: `sha256:<hex>`. */
export const HASHED_IDEMPOTENCY_KEY_MARKER = 'sha256:';

/**
 * An idempotency key or scope as every store holds it. The one rule, used by `@IdempotencyKey`, the admin page's lookup
 * and the CLI's `keys show`, so that each finds what the others wrote:
 *
 * - text with a character some store cannot hold (NUL: PostgreSQL's `text` refuses it; a UTF-16 surrogate that is not
 *   part of a pair: not well-formed Unicode, it turns into U+FFFD on its way to a store) is stored as
 *   `sha256:<hex>` of NUL followed by its JSON text (which escapes those characters). The leading NUL is a domain
 *   separator: the text hashed by the next rule never holds a NUL, so no other key hashes to the same input;
 * - text longer than `MAX_IDEMPOTENCY_KEY_LENGTH` characters, or that starts with the marker `sha256:`, is stored as
 *   `sha256:<hex>` of the text itself (hashed, never truncated). A short key that looks like a stored hash is hashed
 *   too, so a raw key never equals the stored form of another key;
 * - any other text is stored as it is.
 */
export function normalizeIdempotencyText(text: string): string {
  if (UNSTORABLE.test(text)) return sha256(`\u0000${JSON.stringify(text)}`);
  if (text.length > MAX_IDEMPOTENCY_KEY_LENGTH || text.startsWith(HASHED_IDEMPOTENCY_KEY_MARKER)) return sha256(text);
  return text;
}

/** An idempotency key as stored (see `normalizeIdempotencyText`). */
export function normalizeIdempotencyKey(key: string): string {
  return normalizeIdempotencyText(key);
}

/**
 * The scope of a key when its `@IdempotencyKey` names none: `<queue>:<job name>`, or, for a queue under a BullMQ prefix
 * of its own (not `bull` or `{bull}`), `:<prefix>:<queue>:<job name>` with each `%` and `:` of the prefix written
 * `%25` and `%3A`, so that queues of one name under two prefixes (tenants, environments sharing a Redis) keep their
 * records apart, as their locks are. No two (prefix, queue, job name) share a scope: a queue name holds no `:` (BullMQ
 * refuses it), so `<queue>:` ends at the first `:`; a prefix of its own leads with a `:`, which no queue name starts,
 * and its own `:` are written apart. (Job names may hold `:`: `email:send` on queue `app` and `send` on queue `email`
 * under prefix `app` were one scope, `app:email:send`, when the prefix led without its `:`.)
 */
export function defaultIdempotencyScope(job: { queueName: string; name: string; prefix?: string }): string {
  const prefix = ownQueuePrefix(job.prefix);
  if (prefix === undefined) return `${job.queueName}:${job.name}`;
  return `:${prefix.replaceAll('%', '%25').replaceAll(':', '%3A')}:${job.queueName}:${job.name}`;
}

/** An idempotency scope as stored: the same rule as a key (see `normalizeIdempotencyText`). */
export function normalizeIdempotencyScope(scope: string): string {
  return normalizeIdempotencyText(scope);
}

/**
 * A record's identity: the base64url sha256 of `[scope, key]` as JSON text (which keeps any two pairs apart: no
 * separator ambiguity, lone surrogates escaped). The Redis store names its record by it and waiting deliveries name the
 * key by it, so user data never reaches Redis.
 */
export function recordIdOf(scope: string, key: string): string {
  return hash('sha256', JSON.stringify([scope, key]), 'base64url');
}

function sha256(text: string): string {
  return `${HASHED_IDEMPOTENCY_KEY_MARKER}${hash('sha256', text, 'hex')}`;
}

/** NUL, or a surrogate that is not part of a pair (in a `u` regular expression, pairs are one code point). */
// eslint-disable-next-line no-control-regex -- NUL is exactly what it looks for
const UNSTORABLE = /[\u0000\p{Surrogate}]/u;

/** A stored hashed form, as it shows in records, events and logs. */
const STORED_HASH = /^sha256:[0-9a-f]{64}$/;

/**
 * The stored forms a lookup (the admin page, `keys show`) tries for text a person typed or pasted: as
 * `@IdempotencyKey` would store it first, then, when the text is itself a stored hashed form (`sha256:<64 hex>`, copied
 * from a record, an event or a log line), that form as it is. Without the second, a pasted stored key would be hashed
 * once more and never found.
 */
export function storedFormsOf(text: string): string[] {
  const normalized = normalizeIdempotencyText(text);
  return STORED_HASH.test(text) && normalized !== text ? [normalized, text] : [normalized];
}

/**
 * How a lookup's text matched the record: `'normalized'`, as `@IdempotencyKey` stores the text typed (an ordinary key
 * is unchanged; a long or unstorable one hashed); `'stored form'`, the scope or key was a pasted stored hashed form
 * (`sha256:<hex>`) found as it is.
 */
export type StoredLookupMatch = 'normalized' | 'stored form';

/** How a lookup matched, in words (the admin page and `keys show`). */
export function describeMatch(matchedAs: StoredLookupMatch | undefined): string {
  return matchedAs === 'stored form' ? 'as pasted: the stored hashed form' : 'as @IdempotencyKey stores the text given';
}

/**
 * Looks a typed or pasted scope and key up in a store, trying each of their {@link storedFormsOf}: the record found (or
 * `undefined`), the scope and key as stored (those it was found under, else as `@IdempotencyKey` stores them), and how
 * the text matched (`undefined` when nothing was found).
 */
export async function lookUpStored(
  store: { get(scope: string, key: string): Promise<IdempotencyRecord | undefined> },
  scope: string,
  key: string,
): Promise<{ scope: string; key: string; record: IdempotencyRecord | undefined; matchedAs?: StoredLookupMatch }> {
  const normalizedScope = normalizeIdempotencyScope(scope);
  const normalizedKey = normalizeIdempotencyKey(key);
  for (const storedScope of storedFormsOf(scope)) {
    for (const storedKey of storedFormsOf(key)) {
      const record = await store.get(storedScope, storedKey);
      if (!record) continue;
      const normalized = storedScope === normalizedScope && storedKey === normalizedKey;
      return { scope: storedScope, key: storedKey, record, matchedAs: normalized ? 'normalized' : 'stored form' };
    }
  }
  return { scope: normalizedScope, key: normalizedKey, record: undefined };
}
