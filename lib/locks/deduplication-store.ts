import type { Redis } from 'ioredis';
import type { RedisScripts } from '../redis/redis-scripts.js';
import { DeduplicationPeeks } from './deduplication-peeks.js';
import type { SoonerEnd } from './lock-marks.js';

/**
 * The operations on BullMQ's own deduplication key (an enqueue lock's fast path), each one script call: releasing it at
 * the end of an attempt, moving its end, reading its holder, taking it back. Every write is compare-and-set on the
 * owner job.
 */
export class DeduplicationStore {
  private readonly peeks: DeduplicationPeeks;

  constructor(private readonly scripts: RedisScripts) {
    this.peeks = new DeduplicationPeeks(scripts);
  }

  /**
   * Deletes a deduplication key held by `jobId` at the end of an attempt, only while the attempt's worker still runs
   * the job (`jobLockKey` holds `token`); `inOrderOn`: sent by source on that connection, in order with the commands
   * after it (`RedisScripts.runOn`).
   */
  async release(key: string, jobLockKey: string, jobId: string, token: string, inOrderOn?: Redis): Promise<boolean> {
    return (await this.scripts.runOn(inOrderOn, 'releaseDeduplication', [key, jobLockKey], [jobId, token])) === 1;
  }

  /**
   * Moves the end of a deduplication key's TTL to `ttlMs` from now, for `owner` only, if the key has a TTL; a sooner
   * end only as `sooner` says ({@link SoonerEnd}), read from the job's hash (`jobKey`, in the key's slot).
   */
  async retime(key: string, jobKey: string, owner: string, ttlMs: number, sooner: SoonerEnd): Promise<boolean> {
    const how = typeof sooner === 'object' && 'addedAt' in sooner ? sooner.addedAt : 'never';
    return (await this.scripts.run('retimeDeduplication', [key, jobKey], [owner, ttlMs, how])) === 1;
  }

  /**
   * The job holding a BullMQ deduplication key, or `undefined` when it is free or stale (its job is gone). Reads asked
   * in one tick share one call ({@link DeduplicationPeeks}).
   */
  peek(key: string, jobKeyPrefix: string): Promise<string | undefined> {
    return this.peeks.peek(key, jobKeyPrefix);
  }

  /**
   * Takes BullMQ's deduplication key back for `owner` unless another live job holds it: `'held'`, or `'other'`.
   * `whileLive`: only while the owner job is there, not finished and not run by another worker than the one holding
   * `whileLive.token` (`'ended'` otherwise: nothing taken).
   */
  async relock(
    key: string,
    owner: string,
    ttl: number | undefined,
    jobKeyPrefix: string,
    whileLive?: { token: string | undefined },
  ): Promise<'held' | 'other' | 'ended'> {
    const live = whileLive ? [1, whileLive.token ?? ''] : [0, ''];
    const answer = await this.scripts.run('relockDeduplication', [key], [owner, ttl ?? 0, jobKeyPrefix, ...live]);
    return answer === 1 ? 'held' : answer === 2 ? 'ended' : 'other';
  }
}
