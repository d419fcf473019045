// An @IdempotencyKey handler's result that cannot be stored, at a very long JSON path: the error's message (what
// BullMQ stores as the job's failedReason) shows the path cut; the error keeps it whole.
import { describe, expect, it } from '@jest/globals';
import { UnserializableIdempotencyResultError } from '../../lib/errors/unserializable-idempotency-result.error.js';
import { serializeResult } from '../../lib/idempotency/attempt-values.js';

/** An object nested `depth` levels, each under a key of `keyLength` characters, holding `leaf` at the bottom. */
function nested(depth: number, keyLength: number, leaf: unknown): unknown {
  const key = 'k'.repeat(keyLength);
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = { [key]: value };
  return value;
}

describe('serializeResult: an unserializable result at a long path', () => {
  const ref = { scope: 'payments', key: 'evt-1', owner: 'owner-1' };

  it('a BigInt under 500 levels of 2,000-character keys: a short message, the whole path on the error', () => {
    let error: unknown;
    try {
      serializeResult(nested(500, 2_000, 1n), ref);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(UnserializableIdempotencyResultError);
    const { message, path, reason } = error as UnserializableIdempotencyResultError;
    expect(message.length).toBeLessThan(2_000);
    expect(message).toContain('BigInt has no JSON form');
    expect(message).toMatch(/\(at \$\.k+…\)$/);
    expect(reason.length).toBeLessThan(1_000);
    expect(path).toHaveLength(500 * 2_001 + 1);
    expect(path).toBe('$' + `.${'k'.repeat(2_000)}`.repeat(500));
  });

  it('a short path is shown whole', () => {
    expect(() => serializeResult({ total: 1n }, ref)).toThrow(
      'The result for idempotency key "evt-1" (scope "payments") cannot be stored as JSON: BigInt has no JSON form; convert it to a string (at $.total)',
    );
  });

  // The serializer speaks of hashing (its other use: lock arguments); a result is stored, not hashed (found by session
  // 35's new-user review: "undefined (a missing field?) cannot be hashed" for a handler's return value).
  it('speaks of storing, not hashing', () => {
    expect(() => serializeResult({ ids: [1, undefined] }, ref)).toThrow(
      'cannot be stored as JSON: undefined (a missing field?) cannot be stored; use null (at $.ids[1])',
    );
    expect(() => serializeResult({ run: () => 1 }, ref)).toThrow('a function cannot be stored (at $.run)');
  });
});
