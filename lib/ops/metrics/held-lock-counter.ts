import type { Cluster, Redis } from 'ioredis';
import { bullKeys, KEY_SUFFIX, parseOwnKey, UniqueJobsKeys } from '../../redis/keys.js';
import type { HeldLocksGaugeOptions } from './interfaces/unique-jobs-metrics-options.interface.js';
import { escapeGlob, scanNodes } from '../../redis/scan.js';

/** How many lock keys there are, and whether the whole key space was scanned. */
export interface HeldLockCount {
  /** Enqueue locks: the library's `:queued` / `:expiring` keys and the queues' deduplication keys. */
  enqueue: number;
  /** Run-time locks (`:running` keys). */
  runtime: number;
  /** `false` when the scan stopped at `maxScans`: the counts are lower bounds. */
  complete: boolean;
}

/** A queue whose deduplication keys are counted: its name and key prefix. */
export interface CountedQueue {
  name: string;
  prefix: string;
}

/**
 * Counts held lock keys with SCAN, bounded by a number of SCAN calls, and keeps the count for `cacheMs`. One pass over
 * the library's keys (`<prefix>:{…}:…`) and one over deduplication keys (`…:de:uj:…`, kept when they belong to one of
 * this application's queues); on Redis Cluster, on every master.
 */
export class HeldLockCounter {
  private readonly scanCount: number;
  private readonly maxScans: number;
  private readonly cacheMs: number;
  private cached: { at: number; count: Promise<HeldLockCount> } | undefined;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string,
    private readonly queues: () => readonly CountedQueue[],
    options: HeldLocksGaugeOptions = {},
  ) {
    this.scanCount = options.scanCount ?? 1000;
    this.maxScans = options.maxScans ?? 200;
    this.cacheMs = options.cacheMs ?? 10_000;
  }

  /** The count (a cached one when it is recent enough; a failed count is not kept). */
  count(): Promise<HeldLockCount> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < this.cacheMs) return this.cached.count;
    const count = this.scan();
    this.cached = { at: now, count };
    count.catch(() => (this.cached = undefined));
    return count;
  }

  private async scan(): Promise<HeldLockCount> {
    const result: HeldLockCount = { enqueue: 0, runtime: 0, complete: true };
    let budget = this.maxScans;
    const keys = new UniqueJobsKeys(this.prefix);
    const bases = new Set(
      this.queues().map((queue) => bullKeys.deduplicationBase(bullKeys.qualifiedName(queue.prefix, queue.name))),
    );
    const passes: { match: string; count(key: string): void }[] = [
      {
        match: keys.pattern(),
        count: (key) => {
          const own = parseOwnKey(key);
          if (own?.prefix !== this.prefix) return;
          if (own.suffix === KEY_SUFFIX.running) result.runtime++;
          else if (own.suffix === KEY_SUFFIX.queued || own.suffix === KEY_SUFFIX.expiring) result.enqueue++;
        },
      },
    ];
    if (bases.size > 0) {
      const marker = bullKeys.deduplicationMarker;
      passes.push({
        match: `*${escapeGlob(marker)}*`,
        count: (key) => {
          const at = key.lastIndexOf(marker);
          if (at >= 0 && bases.has(key.slice(0, at + marker.length))) result.enqueue++;
        },
      });
    }
    for (const pass of passes) {
      for (const node of scanNodes(this.client)) {
        let cursor = '0';
        do {
          if (budget-- <= 0) return { ...result, complete: false };
          const [next, keys] = await node.scan(cursor, 'MATCH', pass.match, 'COUNT', this.scanCount);
          cursor = next;
          // SCAN may return a key twice across calls (never within one): a rare overcount while keys move.
          for (const key of keys) pass.count(key);
        } while (cursor !== '0');
      }
    }
    return result;
  }
}
