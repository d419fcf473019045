import { performance } from 'node:perf_hooks';
import type { LockCounts } from './lock-inspection.interface.js';

/** A count, and when it settled (`undefined` while it runs). */
interface Cached {
  counts: Promise<LockCounts>;
  settledAt: number | undefined;
}

/**
 * Keeps a lock count for `cacheMs` after it settles, so frequent or parallel readers (metric scrapes, admin page views)
 * share one bounded scan instead of each running its own: a count still running is shared however long it takes, so
 * a slow Redis never gets scans piled on it. Timed on the monotonic clock (a wall clock stepped back does not freeze
 * it). A failed count is not kept.
 */
export class LockCountCache {
  private cached: Cached | undefined;

  constructor(
    private readonly count: () => Promise<LockCounts>,
    private readonly cacheMs: number,
  ) {}

  /** The counts: the running or recent enough one, else a new one. */
  get(): Promise<LockCounts> {
    const cached = this.cached;
    if (cached && (cached.settledAt === undefined || performance.now() - cached.settledAt < this.cacheMs)) {
      return cached.counts;
    }
    const entry: Cached = { counts: this.count(), settledAt: undefined };
    this.cached = entry;
    entry.counts.then(
      () => (entry.settledAt = performance.now()),
      () => {
        if (this.cached === entry) this.cached = undefined;
      },
    );
    return entry.counts;
  }

  /** Forgets the cached count (after a change the reader made itself, so it sees it at once). */
  clear(): void {
    this.cached = undefined;
  }
}
