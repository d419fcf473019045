import type { Cluster, Redis } from 'ioredis';
import type { UniqueJobsKeys } from './keys.js';
import type { RedisScripts } from './redis-scripts.js';

/** How many queue names a registry keeps at most (a bound on its bytes; past it, readers scan as without one). */
export const QUEUE_REGISTRY_LIMIT = 1_000;

/**
 * The queues the library's processes guard, recorded under the library's prefix ({@link UniqueJobsKeys.queueRegistry})
 * so that the CLI can inspect their locks without a SCAN of the whole key space for BullMQ's `meta` keys (seconds on a
 * Redis holding millions of keys), and the reaper can find the queue of a lock's job created since its last SCAN. Each
 * process records a queue once: when it guards it, or at its first enqueue through the library (and again at the next
 * enqueue when that failed); a registry can name a queue that no longer exists (its keys are then simply not found).
 */
export class QueueRegistry {
  private readonly recorded = new Set<string>();

  constructor(
    private readonly scripts: RedisScripts,
    private readonly keys: UniqueJobsKeys,
    /** A failure to record (Redis out of reach at bootstrap): the CLI then scans for this queue. */
    private readonly failed: (error: unknown) => void,
  ) {}

  /** Records a queue by its qualified name (`<BullMQ prefix>:<queue>`), once per process; not waited for. */
  note(qualifiedName: string): void {
    if (this.recorded.has(qualifiedName)) return;
    this.recorded.add(qualifiedName);
    this.scripts
      .run('registerQueue', [this.keys.queueRegistry], [qualifiedName, QUEUE_REGISTRY_LIMIT])
      .catch((error: unknown) => {
        this.recorded.delete(qualifiedName);
        this.failed(error);
      });
  }

  /** The qualified names recorded under a prefix (empty when no process of this version recorded any). */
  static async read(client: Redis | Cluster, keys: UniqueJobsKeys): Promise<string[]> {
    return (await client.smembers(keys.queueRegistry)).sort();
  }
}
