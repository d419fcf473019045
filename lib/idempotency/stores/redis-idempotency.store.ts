import type { Cluster, Redis } from 'ioredis';
import { UniqueJobsKeys } from '../../redis/keys.js';
import { RedisScripts, runInOrder } from '../../redis/redis-scripts.js';
import { knownOnSameServer } from '../../redis/same-server.js';
import { DEFAULT_PREFIX } from '../../redis/keys.js';
import { recordIdOf } from '../stored-key.js';
import type {
  IdempotencyClaim,
  IdempotencyClaimResult,
  IdempotencyCompletion,
  IdempotencyFailure,
  IdempotencyHandover,
  IdempotencyRecord,
  IdempotencyRecordRef,
  IdempotencyState,
  IdempotencyStore,
} from '../idempotency-store.interface.js';

/** Options of {@link RedisIdempotencyStore}. */
export interface RedisIdempotencyStoreOptions {
  /** The Redis client (not closed by the store). */
  client: Redis | Cluster;
  /** Key prefix. Default: the library's default prefix, `'uniquejobs'`. */
  prefix?: string;
}

/**
 * The default idempotency store: one hash per key, `<prefix>:{<sha256 of scope and key>}:idempotency`, on the lock
 * connection. Claim, renew, complete/fail and release are each one Lua script; times come from the Redis server's
 * clock. Every record carries a TTL (its lease, then its retention), so memory is bounded without a sweeper. Redis has
 * no transaction spanning your database, so this store has no transactional mode: use the PostgreSQL or SQLite store
 * for that, or hand {@link IdempotencyContext.downstreamKey} to the system the effect lands in.
 */
export class RedisIdempotencyStore implements IdempotencyStore<never> {
  readonly name = 'redis';
  private readonly client: Redis | Cluster;
  private readonly scripts: RedisScripts;
  private readonly keys: UniqueJobsKeys;

  constructor(options: RedisIdempotencyStoreOptions) {
    this.client = options.client;
    this.scripts = new RedisScripts(options.client);
    this.keys = new UniqueJobsKeys(options.prefix ?? DEFAULT_PREFIX);
  }

  /** The Redis key of a record (hashed: no raw user data in key names). */
  recordKey(scope: string, key: string): string {
    return this.keys.idempotencyRecord(recordIdOf(scope, key));
  }

  async claim(request: IdempotencyClaim): Promise<IdempotencyClaimResult> {
    const { scope, key, owner, leaseMs, fingerprint, jobId, jobKey, jobCreatedAt, resumeOwner } = request;
    const reply = (await this.scripts.run(
      'idempotencyClaim',
      [this.recordKey(scope, key)],
      [scope, key, owner, leaseMs, fingerprint ?? '', jobId ?? '', jobKey ?? '', jobCreatedAt ?? '', resumeOwner ?? ''],
    )) as [1, number, number, number] | [0, number, string[], number?];
    if (reply[0] === 1) return claimedAs(reply[1] === 1, reply[2] === 1, reply[3] === 1);
    const record = toRecord(pairs(reply[2]));
    return { claimed: false, record, expiresInMs: reply[1], ownJob: reply[3] === 1 };
  }

  async renew(ref: IdempotencyRecordRef, leaseMs: number): Promise<boolean> {
    return (
      (await this.scripts.run('idempotencyRenew', [this.recordKey(ref.scope, ref.key)], [ref.owner, leaseMs])) === 1
    );
  }

  complete(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): Promise<boolean> {
    return this.settle(ref, 'completed', completion.result, completion.ttlMs);
  }

  completeInOrder(
    connection: Redis,
    ref: IdempotencyRecordRef,
    completion: IdempotencyCompletion,
  ): Promise<boolean> | undefined {
    if (!knownOnSameServer(this.client, connection)) return undefined;
    return runInOrder(
      connection,
      'idempotencySettle',
      [this.recordKey(ref.scope, ref.key)],
      settleArgs(ref, 'completed', completion.result, completion.ttlMs),
    ).then((settled) => settled === 1);
  }

  async handOver(ref: IdempotencyRecordRef, handover: IdempotencyHandover): Promise<boolean> {
    const args = [ref.owner, handover.owner, handover.leaseMs];
    return (await this.scripts.run('idempotencyHandOver', [this.recordKey(ref.scope, ref.key)], args)) === 1;
  }

  fail(ref: IdempotencyRecordRef, failure: IdempotencyFailure): Promise<boolean> {
    return this.settle(ref, 'failed', failure.error, failure.ttlMs);
  }

  async release(ref: IdempotencyRecordRef): Promise<boolean> {
    return (await this.scripts.run('idempotencyRelease', [this.recordKey(ref.scope, ref.key)], [ref.owner])) === 1;
  }

  async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
    // One script: the record and the clock of the server holding it (on Redis Cluster a separate TIME could reach
    // another master, whose clock may disagree with the one that wrote the record's times).
    const [now, flat] = (await this.scripts.run('idempotencyGet', [this.recordKey(scope, key)], [])) as [
      number,
      string[],
    ];
    const fields = pairs(flat);
    if (!fields.state) return undefined;
    const record = toRecord(fields);
    return record.expiresAt > now ? record : undefined;
  }

  async delete(scope: string, key: string): Promise<boolean> {
    return (await this.client.del(this.recordKey(scope, key))) === 1;
  }

  private async settle(
    ref: IdempotencyRecordRef,
    state: Exclude<IdempotencyState, 'in_progress'>,
    value: string | undefined,
    ttlMs: number,
  ): Promise<boolean> {
    const args = settleArgs(ref, state, value, ttlMs);
    return (await this.scripts.run('idempotencySettle', [this.recordKey(ref.scope, ref.key)], args)) === 1;
  }
}

function settleArgs(
  ref: IdempotencyRecordRef,
  state: Exclude<IdempotencyState, 'in_progress'>,
  value: string | undefined,
  ttlMs: number,
): (string | number)[] {
  return [ref.owner, state, value === undefined ? 0 : 1, value ?? '', ttlMs];
}

function pairs(flat: readonly string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]] = flat[i + 1];
  return fields;
}

function toRecord(fields: Record<string, string>): IdempotencyRecord {
  return {
    scope: fields.scope,
    key: fields.key,
    state: fields.state as IdempotencyState,
    owner: fields.owner,
    jobId: fields.job,
    fingerprint: fields.fp,
    result: fields.result,
    error: fields.error,
    attempts: Number(fields.attempts ?? 1),
    createdAt: Number(fields.created),
    expiresAt: Number(fields.until),
  };
}

/** A won claim's answer; `resumed` and `laterStep` only when true (the common answer stays `{ claimed, takeover }`). */
function claimedAs(takeover: boolean, resumed: boolean, laterStep: boolean): IdempotencyClaimResult {
  if (resumed) return { claimed: true, takeover, resumed };
  return laterStep ? { claimed: true, takeover, laterStep } : { claimed: true, takeover };
}
