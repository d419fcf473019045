import { hash } from 'node:crypto';
import type { LockType, UniqueAcross } from '../interfaces/unique-job-options.interface.js';
import { bullKeys, DEFAULT_QUEUE_PREFIX, ownQueuePrefix, UniqueJobsKeys } from '../redis/keys.js';
import { canonicalJson } from './canonical-json.js';

/** Version of the digest recipe; it is part of every digest, so a future recipe never collides with this one. */
export const DIGEST_VERSION = 'v1';

/** What a digest is computed from. */
export interface DigestInput {
  /** Queue name (left out when unique across queues). */
  queue: string;
  /**
   * BullMQ's key prefix of the queue. Default `'bull'` (`'{bull}'`, as Redis Cluster users write it, counts as
   * `'bull'`). Any other prefix is part of the digest, so that queues of one name under two prefixes (two environments
   * sharing a Redis) never share a lock.
   */
  queuePrefix?: string;
  /** Job name (left out when unique across names). */
  name: string;
  /** The lock arguments: what `lockArgs` returned, or the whole job data. */
  lockArgs: unknown;
  /** Leave the queue and/or the job name out. */
  uniqueAcross?: UniqueAcross | readonly UniqueAcross[];
  /**
   * `true` when `lockArgs` is the output of a `lockArgs` function: an `undefined` property there is a missing field, and
   * hashing it away would make every job missing it collide, so it is rejected. Whole job data (no `lockArgs`) skips
   * `undefined` properties as JSON does. Default `false`.
   */
  picked?: boolean;
}

/**
 * The uniqueness digest of a job: `v1:` + the sha256 (hex) of the canonical JSON (sorted keys) of
 * `["v1", queue | null, name | null, lockArgs]`, with the queue's BullMQ prefix as a fifth element when it is not
 * `'bull'` (nor `'{bull}'`, as Redis Cluster users write it). The run time or delay is not part of it. Raw job data never reaches a Redis key: keys embed only this hash.
 *
 * @throws UnserializableLockArgsError when the lock arguments cannot be hashed canonically.
 */
export function digest(input: DigestInput): string {
  const across = input.uniqueAcross;
  const leftOut = (part: UniqueAcross) => across === part || (Array.isArray(across) && across.includes(part));
  // Serialized apart so an error's path starts at the lock arguments ($.amount), not at this wrapper array.
  const lockArgs = canonicalJson(input.lockArgs, { undefinedProperties: input.picked ? 'reject' : 'skip' });
  const queuePrefix = ownQueuePrefix(input.queuePrefix);
  const prefix = queuePrefix === undefined ? '' : `,${JSON.stringify(queuePrefix)}`;
  const material = `[${JSON.stringify(DIGEST_VERSION)},${JSON.stringify(leftOut('queues') ? null : input.queue)},${JSON.stringify(leftOut('names') ? null : input.name)},${lockArgs}${prefix}]`;
  return `${DIGEST_VERSION}:${hash('sha256', material, 'hex')}`;
}

/** Where a lock lives, for {@link lockKey}. */
export interface LockKeyInput extends DigestInput {
  /** The module's key prefix. Default `'uniquejobs'`. */
  prefix?: string;
  /** `lockLimit` of the job (a limit above 1 moves the enqueue lock to the library's own key). Default 1. */
  lockLimit?: number;
  /** Which lock: the enqueue lock (default) or the run-time lock. */
  kind?: 'enqueue' | 'runtime';
  /** The lock type (`until_expired` keeps its enqueue lock in the library's own key). */
  lock?: LockType;
}

/**
 * The Redis key that holds a job's lock, for inspecting it with redis-cli. Enqueue locks with `lockLimit` 1 on one
 * queue are BullMQ deduplication keys in the queue's key space; the others are the library's own keys under `prefix`.
 */
export function lockKey(input: LockKeyInput): string {
  const value = digest(input);
  const keys = new UniqueJobsKeys(input.prefix ?? 'uniquejobs');
  if (input.kind === 'runtime') return keys.runtimeLock(value);
  if (usesDeduplicationKey(input.lock ?? 'until_executed', input.lockLimit ?? 1, input.uniqueAcross)) {
    return bullKeys.deduplication(
      bullKeys.qualifiedName(input.queuePrefix ?? DEFAULT_QUEUE_PREFIX, input.queue),
      value,
    );
  }
  return keys.enqueueLock(value, input.lock);
}

/**
 * Whether an enqueue lock rides on BullMQ's native deduplication (one Redis call: the lock is taken inside BullMQ's add
 * script). It can when one holder is admitted, the lock is per queue, and the lock ends with its job: BullMQ deletes a
 * deduplication key when its job is removed (`clean`, `remove`, `removeOnComplete`), which must not end an
 * `until_expired` period.
 */
export function usesDeduplicationKey(
  lock: LockType,
  lockLimit: number,
  uniqueAcross: UniqueAcross | readonly UniqueAcross[] | undefined,
): boolean {
  return (
    lock !== 'until_expired' &&
    lockLimit === 1 &&
    !(uniqueAcross === undefined ? [] : [uniqueAcross].flat()).includes('queues')
  );
}
