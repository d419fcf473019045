import type { LockCounts } from './lock-inspection.interface.js';

/**
 * Keeps a lock count for `cacheMs`, so frequent or parallel readers (metric scrapes, admin page views) share one
 * bounded scan instead of each running its own. A failed count is not kept.
 */
export class LockCountCache {
  private cached: { at: number; counts: Promise<LockCounts> } | undefined;

  constructor(
    private readonly count: () => Promise<LockCounts>,
    private readonly cacheMs: number,
  ) {}

  /** The counts: a cached one when it is recent enough (or still being made), else a new one. */
  get(): Promise<LockCounts> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < this.cacheMs) return this.cached.counts;
    const counts = this.count();
    const entry = { at: now, counts };
    this.cached = entry;
    counts.catch(() => {
      if (this.cached === entry) this.cached = undefined;
    });
    return counts;
  }

  /** Forgets the cached count (after a change the reader made itself, so it sees it at once). */
  clear(): void {
    this.cached = undefined;
  }
}
