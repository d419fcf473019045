import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { asError, cut } from '../errors/thrown.js';
import { TruncatedDeadSetEntryError } from '../errors/truncated-dead-set-entry.error.js';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { UniqueJobsKeys } from '../redis/keys.js';
import type { RedisScripts } from '../redis/redis-scripts.js';
import { DEFAULT_DEAD_SET } from './dead-set-defaults.js';
import { fitted } from './fitted-entry.js';
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
  /**
   * How long a retry's claim of an entry lasts unless renewed (every third of it while the retry's enqueue runs), ms:
   * the entry of a retry whose process died is back in the dead set that long after the claim's last renewal, at most.
   * Default 60 000.
   */
  retryClaimMs?: number;
}

/** A retry's claim of an entry: the entry as claimed, and the retry's own token. */
interface Claim {
  id: string;
  json: string;
  /** Its score in the index (Redis' clock), which a put-back keeps. */
  since: string;
  token: string;
}

/**
 * Where the dead set warns: an entry stored without its payload, a retry whose claim lapsed, an entry a failed retry
 * could not put back (the module's logger in an application; standard error in the CLI).
 */
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
  private readonly claimMs: number;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly scripts: RedisScripts,
    private readonly keys: UniqueJobsKeys,
    private readonly bounds: DeadSetBounds,
    private readonly requeue: DeadSetRequeue,
    private readonly logger: DeadSetLogger,
  ) {
    this.maxBytes = bounds.maxBytes ?? Number.MAX_SAFE_INTEGER;
    this.maxEntryBytes = Math.min(bounds.maxEntryBytes ?? Number.MAX_SAFE_INTEGER, this.maxBytes);
    this.claimMs = bounds.retryClaimMs ?? RETRY_CLAIM_MS;
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
    const value = (await this.scripts.run('deadSetGet', this.setKeys(), [id, ...this.boundsArgs()])) as string | null;
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
   * a full Redis (maxmemory) allows both the claim and the put-back (one that is alone over `maxBytes` now is dropped,
   * with a warning). The claim is renewed while the enqueue runs; one that is no longer renewed (the process died
   * mid-retry) or never settled (Redis could not be reached to put the entry back) returns the entry to the dead set
   * at most `retryClaimMs` (60 s) later, at the next read of the dead set (list, size, get, delete or retry).
   *
   * @throws TruncatedDeadSetEntryError when the entry was stored without its payload; it stays in the dead set.
   */
  async retry(id: string): Promise<EnqueueResult | undefined> {
    const stored = await this.get(id);
    if (stored?.truncated) throw new TruncatedDeadSetEntryError(id, stored.originalBytes, stored.payloadSha256);
    const token = randomBytes(9).toString('base64url');
    const claimed = (await this.scripts.run('deadSetClaim', this.setKeys(), [
      ...[id, this.claimMs],
      ...this.boundsArgs(),
      token,
    ])) as [string, string] | null;
    if (!claimed) return undefined;
    const claim: Claim = { id, json: claimed[0], since: claimed[1], token };
    const entry = storedEntry(id, claim.json);
    // Renewed while the enqueue runs (it may wait for its queue's Redis up to enqueueTimeout, or for ever).
    const renewal = setInterval(() => void this.renew(claim, renewal), this.claimMs / 3);
    renewal.unref();
    let result: EnqueueResult;
    try {
      if (!isRetryable(entry)) throw new TruncatedDeadSetEntryError(id, entry.originalBytes, entry.payloadSha256);
      result = await this.requeue(entry);
    } catch (error) {
      clearInterval(renewal);
      // The enqueue's error is thrown; a put-back that fails too leaves the entry to its claim's end.
      const putBack = await this.settle(claim, 'failed').catch(() => undefined);
      if (putBack === -1) this.logger.warn(overBound(id, claim.json, this.maxBytes, 'could not be put back'));
      throw error;
    }
    clearInterval(renewal);
    await this.settle(claim, 'enqueued').catch((error: unknown) =>
      this.logger.warn(
        `Dead-set entry ${id} was enqueued again (${describeResult(result)}) but could not be removed from the dead set ` +
          `(${asError(error).message}): it is listed again once its claim ends, ${this.claimMs / 1000} s at most`,
      ),
    );
    return result;
  }

  /** Renews a retry's claim; one that lapsed (another retry may take the entry) is said once, and renewed no more. */
  private async renew(claim: Claim, renewal: NodeJS.Timeout): Promise<void> {
    const held = await this.settle(claim, 'renew').catch(() => undefined); // a failed renewal is tried again
    if (held !== 0) return;
    clearInterval(renewal);
    this.logger.warn(
      `Dead-set entry ${claim.id}: its retry's claim lapsed before its enqueue ended (${this.claimMs / 1000} s ` +
        'without a renewal): the entry is back in the dead set, and another retry of it may enqueue it too',
    );
  }

  /**
   * Renews a retry's claim of an entry, or ends it: gone once enqueued, else put back as old as it was (through the
   * bounds). Resolves 1 when the claim was still held, 0 when not, -1 when a put-back was refused for its size.
   */
  private async settle({ id, json, since, token }: Claim, outcome: 'renew' | 'enqueued' | 'failed'): Promise<number> {
    const args = [id, since, json, outcome, ...this.boundsArgs(), this.claimMs, token];
    return (await this.scripts.run('deadSetSettle', this.setKeys(), args)) as number;
  }

  /** The dead set's keys, as every script but deadSetAdd takes them. */
  private setKeys(): string[] {
    const { keys } = this;
    return [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes, keys.deadSetClaims];
  }

  /**
   * The bounds, as deadSetAdd takes them, for the scripts that put back the claims of retries never settled (and whose
   * maxAge, 0 when unknown, also bounds what get, list and take read).
   */
  private boundsArgs(): number[] {
    return [this.bounds.maxSize, this.bounds.maxAge ?? 0, this.maxBytes, DEFAULT_DEAD_SET.maxAge];
  }

  /** Stores a new entry. */
  private async store(id: string, json: string): Promise<void> {
    const dropped = await this.scripts.run(
      'deadSetAdd',
      [this.keys.deadSetIndex, this.keys.deadSetEntries, this.keys.deadSetBytes],
      [id, json, this.bounds.maxSize, this.bounds.maxAge ?? 0, this.maxBytes, DEFAULT_DEAD_SET.maxAge, ''],
    );
    if (dropped === -1) throw new UniqueJobsError(overBound(id, json, this.maxBytes, 'was not stored'));
  }

  private async read(offset: number, limit: number): Promise<(number | string)[]> {
    return (await this.scripts.run('deadSetList', this.setKeys(), [offset, limit, ...this.boundsArgs()])) as (
      number | string
    )[];
  }

  /** Takes an entry out for good (not one a retry claimed: it is out of the dead set until that retry ends). */
  private async take(id: string): Promise<DeadSetEntry | undefined> {
    const value = (await this.scripts.run('deadSetTake', this.setKeys(), [id, ...this.boundsArgs()])) as
      [string, string | null] | null;
    return value === null ? undefined : storedEntry(id, value[0]);
  }
}

/** Why an entry is not kept: its JSON alone is over `maxBytes`. */
function overBound(id: string, json: string, maxBytes: number, what: string): string {
  return (
    `Dead-set entry ${id} ${what}: its JSON is ${Buffer.byteLength(json)} bytes, over deadSet.maxBytes (${maxBytes}) ` +
    'on its own; no other entry was dropped for it'
  );
}

/** A retry's outcome, for a warning. */
function describeResult(result: EnqueueResult): string {
  const jobId = result.status === 'enqueued' ? result.job.id : result.existingJobId;
  return `${result.status === 'enqueued' ? 'job' : 'a duplicate of job'} ${cut(String(jobId), SHOWN)}`;
}

/**
 * How long a retry's claim of an entry lasts unless renewed (every third of it while its enqueue runs): the entry of a
 * retry whose process died is back in the dead set that long after the last renewal, at most.
 */
export const RETRY_CLAIM_MS = 60_000;

/** Longest queue, job name or digest a warning shows (UTF-16 code units). */
const SHOWN = 200;
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
