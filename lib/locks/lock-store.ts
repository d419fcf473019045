import type { Redis } from 'ioredis';
import { BullJobReads } from '../redis/bull-job-reads.js';
import { runInOrder, type RedisScripts, type ScriptName } from '../redis/redis-scripts.js';
import { DeduplicationStore } from './deduplication-store.js';
import { PARKED_MARK, takeMark, type SoonerEnd } from './lock-marks.js';

/** The answer of an acquire: held, or held by someone else (`holder`) for about `retryAfter` ms more. */
export type AcquireResult =
  /**
   * `resumed`: the owner re-entered a slot parked for a step job's next delivery ({@link PARKED_MARK}). `mark`: the
   * mark the slot carries, answered to a {@link LockStore.acquireSlot} take that keeps it (`'0'`: none).
   */
  | { acquired: true; resumed?: boolean; mark?: string }
  | {
      acquired: false;
      holder: string | undefined;
      retryAfter: number;
      /** A run-time lock's slots parked for a step job's next delivery (at most 10): member and lease as stored. */
      parked?: ParkedSlot[];
      /**
       * The run-time slot refusing the take is the job's own, closed off under a handler whose worker closed with force
       * (`RuntimeLease.closeOff`): not a conflict, the job waits for that run to end (`retryAfter`: its lease's end).
       */
      closedOff?: boolean;
    };

/** A lock slot parked for a step job's next delivery: its member and its lease (score) as Redis stores it. */
export interface ParkedSlot {
  member: string;
  lease: string;
}

/**
 * The lock operations on Redis, each one call (a script, or a plain command where one does): counted slots with owner
 * leases (run-time locks and the general enqueue path); BullMQ's deduplication key in {@link deduplication}. Every
 * release and renewal is compare-and-set on the owner.
 */
export class LockStore {
  /** What BullMQ did with a job (its hash, lock and event stream), read on the same connection. */
  readonly jobs: BullJobReads;
  /** BullMQ's own deduplication key (an enqueue lock's fast path), through the same scripts. */
  readonly deduplication: DeduplicationStore;

  constructor(private readonly scripts: RedisScripts) {
    this.jobs = new BullJobReads(scripts);
    this.deduplication = new DeduplicationStore(scripts);
  }

  /**
   * Takes one of `limit` slots of `key` for `owner` with a lease of `leaseMs`. `reentrant` (default): an owner that
   * holds a slot takes it again (a retried or recovered job); else it is answered as the holder. `mark`: this take's
   * mark ({@link takeMark}), which its renewals and release name ({@link renewMarked}, {@link releaseMarked}).
   * `formerly`: the form of the same owner an earlier build wrote (a re-entrant take with a mark takes a slot held
   * under it over, as its own).
   */
  async acquire(
    key: string,
    owner: string,
    leaseMs: number,
    limit: number,
    reentrant = true,
    mark?: string,
    formerly?: string,
  ): Promise<AcquireResult> {
    const marked = mark === undefined ? [] : formerly === undefined ? [mark] : [mark, formerly];
    const args = [owner, leaseMs, limit, reentrant ? 1 : 0, ...marked];
    const [held, holder, retryAfter, ...slots] = (await this.scripts.run('acquireLock', [key], args)) as [
      number,
      string | null,
      number | undefined,
      ...string[],
    ];
    if (held === 1) return retryAfter === 1 ? { acquired: true, resumed: true } : { acquired: true };
    const refused = { acquired: false as const, holder: holder ?? undefined, retryAfter: retryAfter ?? 0 };
    if (slots.length === 0) return refused;
    const parked: ParkedSlot[] = [];
    for (let i = 0; i + 1 < slots.length; i += 2) parked.push({ member: slots[i], lease: slots[i + 1] });
    return { ...refused, parked };
  }

  /**
   * Takes one of `limit` slots of an enqueue lock's `key` for `owner`, as {@link acquire} does, with a new mark
   * ({@link takeMark}); `reentrant: 'keep'`: the owner's job re-entering a slot it holds keeps the slot's mark;
   * `reentrant: 'new'`: a slot the owner holds is taken again for a new job of that id, with a new mark (never the
   * one the slot carries). Renewals keep the mark ({@link renew}), so that a removal of the job that read its slot
   * releases it by that mark ({@link releaseHold}) even when the library's own move of the job renewed or re-took it
   * meanwhile.
   */
  async acquireSlot(
    key: string,
    owner: string,
    leaseMs: number,
    limit: number,
    reentrant: 'keep' | 'new' | false,
  ): Promise<AcquireResult> {
    const args = [owner, leaseMs, limit, reentrant ? 1 : 0, takeMark(), '', reentrant || 'new'];
    const [held, holder, retryAfter, mark] = (await this.scripts.run('acquireLock', [key], args)) as [
      number,
      string | null,
      number | undefined,
      string | undefined,
    ];
    if (held !== 1) return { acquired: false, holder: holder ?? undefined, retryAfter: retryAfter ?? 0 };
    return mark === undefined ? { acquired: true } : { acquired: true, mark };
  }

  /**
   * Takes one of `limit` slots of `key` for a new owner named `<server ms of the take>:<id>` ({@link holderAges} tells
   * how long each has held its slot, renewals or not); the owner, or `undefined` when `limit` hold it.
   */
  async takeStamped(key: string, id: string, leaseMs: number, limit: number): Promise<string | undefined> {
    return ((await this.scripts.run('takeStamped', [key], [id, leaseMs, limit])) as string | null) ?? undefined;
  }

  /** Up to `limit` owners of `key` taken by {@link takeStamped} whose lease is live, with the ms since each was taken. */
  async holderAges(key: string, limit: number): Promise<{ holder: string; ageMs: number }[]> {
    return (await this.ownersWith('holderAges', key, limit)).map(([holder, ageMs]) => ({ holder, ageMs }));
  }

  /**
   * Moves the end of the owner's slot to `leaseMs` from now, keeping its mark (its job's run time moved). A sooner end
   * is made as `sooner` says ({@link SoonerEnd}); `false` when nothing was moved.
   */
  async retime(key: string, owner: string, leaseMs: number, sooner: SoonerEnd): Promise<boolean> {
    const how = typeof sooner === 'object' && 'leaseRead' in sooner ? sooner.leaseRead : 'never';
    return (await this.scripts.run('retimeLock', [key], [owner, leaseMs, how])) === 1;
  }

  /** Renews the owner's lease only while its slot is the one the take marked `mark` took; `false` otherwise. */
  async renewMarked(key: string, owner: string, leaseMs: number, mark: string, newMark?: string): Promise<boolean> {
    const args = [owner, leaseMs, mark, ...(newMark === undefined ? [] : [newMark])];
    return (await this.scripts.run('renewLock', [key], args)) === 1;
  }

  /**
   * Renews the slot a step job parked ({@link PARKED_MARK}) under `owner`, or else under `former` (the member an
   * earlier build wrote for it); `false` when neither holds one. One call.
   */
  async renewParked(key: string, owner: string, former: string, leaseMs: number): Promise<boolean> {
    return (await this.scripts.run('renewLock', [key], [owner, leaseMs, PARKED_MARK, '', former])) === 1;
  }

  /**
   * Gives back the slot a step job parked ({@link PARKED_MARK}) under `owner`, or else under `former` (the member an
   * earlier build wrote for it); `false` when neither holds one. One call.
   */
  async releaseParked(key: string, owner: string, former: string): Promise<boolean> {
    return (await this.scripts.run('releaseMarked', [key], [owner, PARKED_MARK, former])) === 1;
  }

  /**
   * Releases the owner's slot only while it is the one the take marked `mark` took (a take of the same owner since,
   * a job recovered elsewhere after a stall, keeps its slot). `inOrderOn`: send it on that connection, by source (see
   * `runInOrder`), so it takes effect before whatever is sent there next.
   */
  async releaseMarked(key: string, owner: string, mark: string, inOrderOn?: Redis): Promise<boolean> {
    return (await this.scripts.runOn(inOrderOn, 'releaseMarked', [key], [owner, mark])) === 1;
  }

  /**
   * Releases the owner's slot; `false` when it held none. One `ZREM` (Redis deletes the key with its last member), no
   * script: the cheapest command there is for it. `inOrderOn`: send it on that connection (to the lock's server) so it
   * takes effect before whatever is sent there next.
   */
  async release(key: string, owner: string, inOrderOn?: Redis): Promise<boolean> {
    return (await (inOrderOn ?? this.scripts.client).zrem(key, owner)) === 1;
  }

  /**
   * Releases the owner's slot at the end of an attempt only while the job's BullMQ lock (`jobLockKey`) holds the
   * attempt's `token` (a stalled worker leaves it to the job's new run), in one call. On a Cluster, where the two keys
   * hash to different slots, one `ZREM` unchecked; so too, from its first refusal on, on a connection whose server
   * refuses keys of two hash slots in one call (a proxy in front of shards that looks like one server). `on`: the
   * worker's connection, reaching both keys' server.
   */
  async releaseAttemptSlot(key: string, jobLockKey: string, owner: string, token: string, on: Redis) {
    if (on.isCluster || this.scripts.client.isCluster || SHARDED.has(on)) return this.release(key, owner, on);
    try {
      return (await runInOrder(on, 'releaseAttemptSlot', [key, jobLockKey], [owner, token])) === 1;
    } catch (error) {
      if (!/CROSSSLOT/.test(String(error))) throw error;
      SHARDED.add(on);
      return this.release(key, owner, on);
    }
  }

  /** The lease an owner holds `key` with (its score, as stored), or `undefined` when it holds none. */
  async leaseOf(key: string, owner: string): Promise<string | undefined> {
    return (await this.scripts.client.zscore(key, owner)) ?? undefined;
  }

  /**
   * Releases the owner's slot of an enqueue lock only if it is still the one read (`lease`, its score as stored): the
   * slot its mark names (renewed since or not: {@link acquireSlot}), or, for a slot without a mark (taken by an
   * earlier build, or renewed by one), the very lease read. A new take of the same owner since (a job re-added with
   * the same id) carries another mark and is left alone: a take of the slot the owner still holds never draws that
   * slot's mark; a fresh take, after the slot was given back meanwhile, draws the mark read once in 1,022.
   */
  async releaseHold(key: string, owner: string, lease: string): Promise<boolean> {
    const mark = Number(lease) % 1;
    if (mark === 0) return this.releaseLease(key, owner, lease);
    return this.releaseMarked(key, owner, String(mark));
  }

  /** Releases the owner's slot only if it still holds it with `lease` (compare-and-set on owner and lease). */
  async releaseLease(key: string, owner: string, lease: string): Promise<boolean> {
    return (await this.scripts.run('reapLockOwner', [key], [owner, lease])) === 1;
  }

  /**
   * Takes `key` for `ttlMs` if nobody holds it (`SET NX PX`): `true` for one caller only of those that ask while it
   * lives. (BullMQ's removal answers `1` for a job that is already gone, so producers removing one job at once cannot
   * tell from it which of them removed it: the one that takes its report key reports it.)
   */
  async takeOnce(key: string, ttlMs: number): Promise<boolean> {
    return (await this.scripts.client.set(key, '1', 'PX', ttlMs, 'NX')) === 'OK';
  }

  /**
   * Throws Redis' own `OOM command not allowed` error when the server refuses writes that can grow memory (full, with
   * `noeviction`); writes nothing (`probeKey` never exists: `SET … XX`).
   */
  async requireWritable(probeKey: string): Promise<void> {
    await this.scripts.client.set(probeKey, '', 'XX');
  }

  /** The oldest owner of `key` whose lease is live, with the ms its lease has left, or `undefined`. */
  async holder(key: string): Promise<{ holder: string; leftMs: number } | undefined> {
    return (await this.holders(key, 1))[0];
  }

  /** Up to `limit` owners of `key` whose lease is live, the soonest lease end first, with the ms each has left. */
  async holders(key: string, limit: number): Promise<{ holder: string; leftMs: number }[]> {
    return (await this.ownersWith('lockHolder', key, limit)).map(([holder, leftMs]) => ({ holder, leftMs }));
  }

  /** Runs a script answering `{owner, figure, owner, figure, …}` for up to `limit` owners of `key`: the pairs. */
  private async ownersWith(name: ScriptName, key: string, limit: number): Promise<[string, number][]> {
    const found = (await this.scripts.run(name, [key], [limit])) as (string | number)[];
    const pairs: [string, number][] = [];
    for (let i = 0; i + 1 < found.length; i += 2) pairs.push([String(found[i]), Number(found[i + 1])]);
    return pairs;
  }
}

/** Connections whose server refused a call naming keys of two hash slots ({@link LockStore.releaseAttemptSlot}). */
const SHARDED = new WeakSet<Redis>();
