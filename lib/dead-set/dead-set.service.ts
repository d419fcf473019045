import { createHash, randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { asError, cut } from '../errors/thrown.js';
import { TruncatedDeadSetEntryError } from '../errors/truncated-dead-set-entry.error.js';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { UniqueJobsKeys } from '../redis/keys.js';
import type { RedisScripts } from '../redis/redis-scripts.js';
import { DEFAULT_DEAD_SET } from './dead-set-defaults.js';
import { storedEntry } from './stored-entry.js';
import type { DeadSetEntry, NewDeadSetEntry, RetryableDeadSetEntry } from './dead-set-entry.interface.js';

/** Re-enqueues a dead entry through the guarded producer path (set by the module). */
export type DeadSetRequeue = (entry: RetryableDeadSetEntry) => Promise<EnqueueResult>;

/** The bounds of a dead set (the module's `deadSet` option over its defaults). */
export interface DeadSetBounds {
  /** Most entries kept. */
  maxSize: number;
  /**
   * Age (ms) after which an entry is dropped. `undefined` in a process that does not know the application's option
   * (the CLI): no entry is left out or dropped by age there, and putting an entry back never shortens the dead set's
   * expiry.
   */
  maxAge: number | undefined;
  /** Most bytes of entry JSON kept in total. Default: no bound (`Number.MAX_SAFE_INTEGER`). */
  maxBytes?: number;
  /** Largest entry JSON kept with its payload (capped at `maxBytes`). Default: no bound. */
  maxEntryBytes?: number;
}

/** Where the dead set reports an entry stored without its payload. */
export interface DeadSetLogger {
  warn(message: string): void;
}

/**
 * The dead set: rejected duplicates, bounded by entries, age and bytes (oldest dropped first), with list, retry and
 * delete. An entry over `maxEntryBytes` is kept without its payload (see {@link DeadSetEntry}). Retrying claims the
 * entry atomically and enqueues it again through the same uniqueness rules; if that enqueue fails (or never ends), the
 * entry is put back.
 */
export class DeadSetService {
  private readonly maxBytes: number;
  private readonly maxEntryBytes: number;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly scripts: RedisScripts,
    private readonly keys: UniqueJobsKeys,
    private readonly bounds: DeadSetBounds,
    private readonly requeue: DeadSetRequeue,
    private readonly logger: DeadSetLogger = new Logger('UniqueJobs'),
  ) {
    this.maxBytes = bounds.maxBytes ?? Number.MAX_SAFE_INTEGER;
    this.maxEntryBytes = Math.min(bounds.maxEntryBytes ?? Number.MAX_SAFE_INTEGER, this.maxBytes);
  }

  /**
   * Adds an entry; returns its id. An entry whose JSON is over `maxEntryBytes` is stored without its `data` and
   * `opts` (truncated) and a warning says so; if it is still over (a long job name, job id, holder id or reason), its
   * longest strings are cut too (ending with `…`), down to a few characters each.
   *
   * @throws UniqueJobsError when even the cut entry is over `maxBytes` (a dead set bounded below a few hundred bytes):
   *   it is not stored, and no entry is dropped for it.
   */
  async add(entry: NewDeadSetEntry): Promise<string> {
    const id = randomUUID();
    const full: DeadSetEntry = { ...entry, id, rejectedAt: Date.now() };
    let json = JSON.stringify(full);
    const bytes = Buffer.byteLength(json);
    if (bytes > this.maxEntryBytes) {
      const { data, opts, ...metadata } = full;
      const payloadSha256 = createHash('sha256').update(JSON.stringify({ data, opts })).digest('hex');
      json = fitted(
        { ...metadata, truncated: true, originalBytes: bytes, payloadSha256 } satisfies DeadSetEntry,
        this.maxEntryBytes,
      );
      this.logger.warn(
        `Dead-set entry ${id} (queue "${cut(entry.queue, SHOWN)}", job "${cut(entry.jobName, SHOWN)}", ` +
          `digest ${cut(entry.digest, SHOWN)}) is ${bytes} bytes, over deadSet.maxEntryBytes (${this.maxEntryBytes}): ` +
          `stored without its data and options (payload sha256 ${payloadSha256})` +
          `${Buffer.byteLength(json) < bytes && json.includes('…') ? ', its longest strings cut' : ''}; ` +
          'it can be listed and deleted, not retried',
      );
    }
    await this.store(id, json);
    return id;
  }

  /**
   * Entries, newest first (never one older than `maxAge`): `limit` (default 50) of them from the `offset`-th (default
   * 0); both integers ≥ 0.
   *
   * @throws TypeError when `offset` or `limit` is not a number; RangeError when it is not an integer ≥ 0.
   */
  async list(options: { offset?: number; limit?: number } = {}): Promise<DeadSetEntry[]> {
    const offset = countArgument('offset', options.offset ?? 0);
    const limit = countArgument('limit', options.limit ?? 50);
    const [, ...pairs] = (await this.read(offset, limit)) as [number, ...string[]];
    const entries: DeadSetEntry[] = [];
    for (let i = 0; i + 1 < pairs.length; i += 2) entries.push(storedEntry(pairs[i], pairs[i + 1]));
    return entries;
  }

  /** One entry, or `undefined` (as well for an entry older than `maxAge`, which {@link list} leaves out). */
  async get(id: string): Promise<DeadSetEntry | undefined> {
    const value = (await this.scripts.run(
      'deadSetGet',
      [this.keys.deadSetIndex, this.keys.deadSetEntries],
      [id, this.bounds.maxAge ?? 0],
    )) as string | null;
    return value === null ? undefined : storedEntry(id, value);
  }

  /** How many entries the set holds (not counting those older than `maxAge`). */
  async size(): Promise<number> {
    const [count] = await this.read(0, 0);
    return count as number;
  }

  /** Bytes of entry JSON the set holds (the counter that `maxBytes` bounds; entries older than `maxAge` included). */
  async bytes(): Promise<number> {
    return Number((await this.client.get(this.keys.deadSetBytes)) ?? 0);
  }

  /** Deletes an entry; resolves `false` when there was none (an entry older than `maxAge` is dropped, and was none). */
  async delete(id: string): Promise<boolean> {
    return (await this.take(id)) !== undefined;
  }

  /**
   * Takes the entry out and enqueues it again (through the uniqueness rules of its queue). Resolves `undefined` when
   * there is no such entry (or it is older than `maxAge`: it is dropped, not enqueued; or another retry of it is under
   * way). The entry is claimed, not deleted: out of the dead set, kept apart until the enqueue ends. When the enqueue
   * fails, it is put back as it was, with the age it had (so it is dropped by `maxAge` when it would have been, and
   * first among the oldest when `maxSize` or `maxBytes` drops entries added meanwhile) and the enqueue's error thrown;
   * a full Redis (maxmemory) allows both the claim and the put-back. A claim that is never settled (the process died
   * mid-retry, or Redis could not be reached to put the entry back) returns the entry to the dead set
   * {@link RETRY_CLAIM_MS} after it began, at the next list, count or retry.
   *
   * @throws TruncatedDeadSetEntryError when the entry was stored without its payload; it stays in the dead set.
   */
  async retry(id: string): Promise<EnqueueResult | undefined> {
    const stored = await this.get(id);
    if (stored?.truncated) throw new TruncatedDeadSetEntryError(id, stored.originalBytes, stored.payloadSha256);
    const claimed = (await this.scripts.run('deadSetClaim', this.claimKeys(), [
      id,
      this.bounds.maxAge ?? 0,
      RETRY_CLAIM_MS,
    ])) as [string, string] | null;
    if (!claimed) return undefined;
    const entry = storedEntry(id, claimed[0]);
    let result: EnqueueResult;
    try {
      if (!isRetryable(entry)) throw new TruncatedDeadSetEntryError(id, entry.originalBytes, entry.payloadSha256);
      result = await this.requeue(entry);
    } catch (error) {
      // The enqueue's error is thrown; a put-back that fails too leaves the entry to its claim's end.
      await this.settle(id, claimed, 'failed').catch(() => undefined);
      throw error;
    }
    await this.settle(id, claimed, 'enqueued').catch((error: unknown) =>
      this.logger.warn(
        `Dead-set entry ${id} was enqueued again (job ${cut(String(result.status === 'enqueued' ? result.job.id : result.existingJobId), SHOWN)}) but could not be removed from the dead set (${asError(error).message}): it is listed again ${RETRY_CLAIM_MS / 1000} s after its retry began`,
      ),
    );
    return result;
  }

  /** Ends a retry's claim of an entry: gone once enqueued, else put back as old as it was (through the bounds). */
  private async settle(id: string, [json, since]: [string, string], outcome: 'enqueued' | 'failed'): Promise<void> {
    const { maxSize, maxAge } = this.bounds;
    await this.scripts.run('deadSetSettle', this.claimKeys(), [
      ...[id, since, json, outcome],
      ...[maxSize, maxAge ?? 0, this.maxBytes, DEFAULT_DEAD_SET.maxAge],
    ]);
  }

  private claimKeys(): string[] {
    const { keys } = this;
    return [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes, keys.deadSetClaims];
  }

  /** Stores a new entry. */
  private async store(id: string, json: string): Promise<void> {
    const dropped = await this.scripts.run(
      'deadSetAdd',
      [this.keys.deadSetIndex, this.keys.deadSetEntries, this.keys.deadSetBytes],
      [id, json, this.bounds.maxSize, this.bounds.maxAge ?? 0, this.maxBytes, DEFAULT_DEAD_SET.maxAge, ''],
    );
    if (dropped === -1) {
      throw new UniqueJobsError(
        `Dead-set entry ${id} was not stored: its JSON is ${Buffer.byteLength(json)} bytes, over ` +
          `deadSet.maxBytes (${this.maxBytes}) on its own; no other entry was dropped for it`,
      );
    }
  }

  private async read(offset: number, limit: number): Promise<(number | string)[]> {
    return (await this.scripts.run(
      'deadSetList',
      [this.keys.deadSetIndex, this.keys.deadSetEntries, this.keys.deadSetClaims, this.keys.deadSetBytes],
      [offset, limit, this.bounds.maxAge ?? 0],
    )) as (number | string)[];
  }

  /** Takes an entry out for good (one being retried too). */
  private async take(id: string): Promise<DeadSetEntry | undefined> {
    const value = (await this.scripts.run(
      'deadSetTake',
      [this.keys.deadSetIndex, this.keys.deadSetEntries, this.keys.deadSetBytes],
      [id, this.bounds.maxAge ?? 0],
    )) as [string, string | null] | null;
    return value === null ? undefined : storedEntry(id, value[0]);
  }
}

/**
 * How long a retry's claim of an entry lasts: a retry whose enqueue has not ended by then (its process died) has its
 * entry listed again.
 */
export const RETRY_CLAIM_MS = 60_000;

/** Longest queue, job name or digest a warning shows (UTF-16 code units). */
const SHOWN = 200;
/** Shortest a string field of an entry is cut to (UTF-16 code units, the `…` included). */
const MIN_FIELD = 8;
/** The string fields of an entry that may be cut to fit `maxEntryBytes` (what the library writes is short). */
const CUTTABLE = ['reason', 'existingJobId', 'jobId', 'jobName', 'queue', 'bullPrefix', 'digest'] as const;

/**
 * The JSON of a truncated entry (no payload), its longest string fields cut (`…` marks a cut) so that it is at most
 * `maxBytes`: each field gets an even share of what the other fields leave, none is cut below {@link MIN_FIELD}
 * characters (so an entry may stay over a bound of a few hundred bytes; the store refuses it if it is over `maxBytes`).
 */
function fitted(entry: DeadSetEntry, maxBytes: number): string {
  const json = JSON.stringify(entry);
  if (Buffer.byteLength(json) <= maxBytes) return json;
  const fields = CUTTABLE.filter((field) => typeof entry[field] === 'string');
  const sizes = new Map(fields.map((field) => [field, jsonBytes(entry[field] as string)]));
  const fixed = Buffer.byteLength(json) - [...sizes.values()].reduce((sum, size) => sum + size, 0);
  // Water-filling: the smallest fields keep what they have; the others share the rest evenly.
  let budget = maxBytes - fixed;
  let left = fields.length;
  let share = 0;
  for (const field of [...fields].sort((a, b) => sizes.get(a)! - sizes.get(b)!)) {
    share = Math.floor(Math.max(0, budget) / left);
    if (sizes.get(field)! > share) break;
    budget -= sizes.get(field)!;
    left -= 1;
  }
  const bounded: DeadSetEntry = { ...entry };
  for (const field of fields) {
    if (sizes.get(field)! > share) bounded[field] = cutToBytes(entry[field] as string, share);
  }
  return JSON.stringify(bounded);
}

/** Bytes of a string's JSON form, quotes included. */
function jsonBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}

/** `text` cut (with `cut`, so ending with `…`) to the longest prefix whose JSON form is at most `max` bytes. */
function cutToBytes(text: string, max: number): string {
  let low = MIN_FIELD;
  let high = text.length - 1;
  if (jsonBytes(cut(text, low)) > max) return cut(text, low);
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (jsonBytes(cut(text, middle)) <= max) low = middle;
    else high = middle - 1;
  }
  return cut(text, low);
}

/** `value` as an `offset` or `limit` of `list`: an integer ≥ 0. */
function countArgument(name: string, value: unknown): number {
  if (typeof value !== 'number') {
    throw new TypeError(`deadSet.list: ${name} must be a number, an integer ≥ 0 (got ${typeof value})`);
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`deadSet.list: ${name} must be an integer ≥ 0 (got ${value})`);
  }
  return value;
}

function isRetryable(entry: DeadSetEntry): entry is RetryableDeadSetEntry {
  return entry.truncated !== true;
}
