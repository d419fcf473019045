// The suite's constants and helpers (not part of the package's API: the contract's entry exports only
// describeIdempotencyStoreContract and its setup types).
import { randomUUID } from 'node:crypto';
import { expect } from '@jest/globals';
import type {
  IdempotencyClaim,
  IdempotencyClaimResult,
  IdempotencyRecord,
  IdempotencyRecordRef,
  IdempotencyStore,
} from '../../idempotency/idempotency-store.interface.js';

/** The lease of claims that must not expire during a case. */
export const LEASE_MS = 60_000;
/** The lease of claims a case waits to see expire. */
export const SHORT_LEASE_MS = 1_000;
/** The retention of completed or failed records that must not expire during a case. */
export const RETENTION_MS = 3_600_000;
/** The retention of records a case waits to see expire. */
export const SHORT_RETENTION_MS = 1_000;
/** Rounding between a store's times (e.g. microseconds on a database server) and milliseconds. */
export const ROUNDING_MS = 5;
/** How far a store's clock may be from the test's (a database on another host). */
export const CLOCK_SKEW_MS = 10 * 60_000;
/** How long the suite waits for a lease or retention to end. */
export const EXPIRY_TIMEOUT_MS = 15_000;
/** The Jest timeout of a case that waits for a lease or retention to end (Jest's default, 5 s, is shorter). */
export const EXPIRY_CASE_TIMEOUT_MS = 2 * EXPIRY_TIMEOUT_MS + 10_000;
/** The number of concurrent claimants of the race cases. */
export const CONTENDERS = 50;

export const SCOPE = 'contract';

/** A fresh key, named by `label`. */
export function newKey(label: string): string {
  return `${label}-${randomUUID()}`;
}

/** A fresh owner token. */
export function newOwner(): string {
  return `owner-${randomUUID()}`;
}

/** The job id a case gives an owner’s claim. */
export function jobOf(owner: string): string {
  return `job-of-${owner}`;
}

/** The fingerprint a case gives a key’s claim. */
export function fingerprintOf(key: string): string {
  return `fingerprint-of-${key}`;
}

/** The reference of `owner`’s claim of `key` in the suite’s scope. */
export function refOf(key: string, owner: string): IdempotencyRecordRef {
  return { scope: SCOPE, key, owner };
}

/** A claim of `key` by `owner` in the suite’s scope (a long lease), with `overrides`. */
export function claimOf(key: string, owner: string, overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim {
  return {
    scope: SCOPE,
    key,
    owner,
    leaseMs: LEASE_MS,
    fingerprint: fingerprintOf(key),
    jobId: jobOf(owner),
    ...overrides,
  };
}

/** The answer to a claim that must have been refused. */
export function refusedClaim(result: IdempotencyClaimResult): Extract<IdempotencyClaimResult, { claimed: false }> {
  expect(result).toMatchObject({ claimed: false });
  if (result.claimed) throw new Error('the claim was expected to be refused');
  return result;
}

/** The live record of a key, which must exist. */
export async function liveRecord<Transaction>(
  store: IdempotencyStore<Transaction>,
  scope: string,
  key: string,
): Promise<IdempotencyRecord> {
  const record = await store.get(scope, key);
  if (!record)
    throw new Error(`expected a live record for key ${JSON.stringify(key)} (scope ${JSON.stringify(scope)})`);
  return record;
}

/** A settled record is kept `ttlMs` from when it was settled (at or after its claim). */
export function expectRetention(record: IdempotencyRecord, ttlMs: number): void {
  expect(record.expiresAt - record.createdAt).toBeGreaterThanOrEqual(ttlMs - ROUNDING_MS);
  expect(record.expiresAt - record.createdAt).toBeLessThanOrEqual(ttlMs + 60_000);
}

/** Polls `get` until the key has no live record (a lease or retention ended). */
export async function untilAbsent<Transaction>(store: IdempotencyStore<Transaction>, key: string): Promise<void> {
  const deadline = Date.now() + EXPIRY_TIMEOUT_MS;
  while ((await store.get(SCOPE, key)) !== undefined) {
    if (Date.now() > deadline) throw new Error(`key ${key} was still live after ${EXPIRY_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** `length` code points: ASCII, accented, CJK, astral (surrogate pairs) and glob/hash-tag characters, then `id`. */
export function codePoints(length: number, id: string): string {
  const alphabet = ['a', 'é', '鍵', '🔑', '*', '{', '}', '\n', ' ', 'Z'];
  const tail = Array.from(`-${id}`);
  const head = Array.from({ length: length - tail.length }, (_, i) => alphabet[i % alphabet.length]);
  return [...head, ...tail].join('');
}

/** About 200 KB of JSON text with unicode (BMP, astral, combining), escapes and nesting. */
export function largeUnicodeJson(): string {
  const items = Array.from({ length: 1_500 }, (_, i) => ({
    i,
    name: `条目 ${i} — ünïcödé ✓ 🚀 e\u0301 ${'ß'.repeat(i % 7)}`,
    escapes: 'quote " backslash \\ tab \t newline \n nul \u0000 lone \ud800 end',
    amount: i * 1.25,
    flags: [true, false, null],
  }));
  return JSON.stringify({ items, total: items.length });
}
