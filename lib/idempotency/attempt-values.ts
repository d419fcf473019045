import type { Job } from 'bullmq';
import { canonicalJson } from '../digest/canonical-json.js';
import { UnserializableIdempotencyResultError } from '../errors/unserializable-idempotency-result.error.js';
import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';
import type { Attempt } from './attempt.js';
import type { ResolvedIdempotency } from './idempotency-definitions.js';
import type { IdempotencyRecordRef } from './idempotency-store.interface.js';
import { cut, describeThrown } from '../errors/thrown.js';

/** Longest JSON path a failure message shows (UTF-16 code units), as for lock arguments. */
const MAX_PATH = 500;

/**
 * Whether the record is completed by the claim `ref` names (its own completion, already applied); `false` when the
 * store cannot tell (then the completion is reported as a lost lease, as before).
 */
export async function completedBy(definition: ResolvedIdempotency, ref: IdempotencyRecordRef): Promise<boolean> {
  const record = await definition.store.get(ref.scope, ref.key).catch(() => undefined);
  return record?.state === 'completed' && record.owner === ref.owner;
}

export function keyOf(
  definition: ResolvedIdempotency,
  job: Job<unknown, unknown>,
): { key: string } | { missing: string } {
  try {
    return definition.keyOf(job);
  } catch (error) {
    return { missing: `an error (${describeThrown(error).message})` };
  }
}

/**
 * The handler's return value as JSON text (`undefined` stays absent). A text longer than `maxBytes` (UTF-8) is left
 * out: `omitted` is told its size (not for `maxBytes` 0, which keeps none by choice), and the record completes without
 * it.
 */
export function serializeResult(
  value: unknown,
  ref: IdempotencyRecordRef,
  maxBytes = Infinity,
  omitted: (bytes: number) => void = () => undefined,
): string | undefined {
  if (value === undefined) return undefined;
  try {
    const json = canonicalJson(value);
    // A UTF-16 code unit is at most three bytes of UTF-8: counted only when the length leaves the size open.
    if (json.length * 3 <= maxBytes) return json;
    const bytes = Buffer.byteLength(json, 'utf8');
    if (bytes <= maxBytes) return json;
    if (maxBytes > 0) omitted(bytes); // 0: no result is kept, by choice
    return undefined;
  } catch (error) {
    // The serializer speaks of lock arguments (its other use): name the offending value of the result instead. The
    // message shows the path cut (it can be as long as the result); the error keeps it whole.
    if (error instanceof UnserializableLockArgsError) {
      const reason = `${error.reason.replace(/cannot be hashed/g, 'cannot be stored')} (at ${cut(error.path, MAX_PATH)})`;
      throw new UnserializableIdempotencyResultError(ref.scope, ref.key, reason, error.path);
    }
    throw new UnserializableIdempotencyResultError(ref.scope, ref.key, describeThrown(error).message);
  }
}

/** The handler's result as the attempt's record keeps it: {@link serializeResult} within `maxResultBytes`. */
export function storedResult(attempt: Attempt, value: unknown): string | undefined {
  const maxBytes = attempt.definition.options.maxResultBytes;
  return serializeResult(value, attempt.ref, maxBytes, (bytes) => attempt.report.resultOmitted(bytes, maxBytes));
}
