import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { UniqueJobsKeys } from '../redis/keys.js';
import type { RedisScripts } from '../redis/redis-scripts.js';
import type { DeadSetEntry } from './dead-set-entry.interface.js';

/** Re-enqueues a dead entry through the guarded producer path (set by the module). */
export type DeadSetRequeue = (entry: DeadSetEntry) => Promise<EnqueueResult>;

/**
 * The dead set: rejected duplicates, bounded by size and age (oldest dropped first), with list, retry and delete.
 * Retrying takes the entry out atomically and enqueues it again through the same uniqueness rules; if that enqueue
 * fails, the entry is put back.
 */
export class DeadSetService {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly scripts: RedisScripts,
    private readonly keys: UniqueJobsKeys,
    private readonly bounds: { maxSize: number; maxAge: number },
    private readonly requeue: DeadSetRequeue,
  ) {}

  /** Adds an entry; returns its id. */
  async add(entry: Omit<DeadSetEntry, 'id' | 'rejectedAt'>): Promise<string> {
    const id = randomUUID();
    const full: DeadSetEntry = { ...entry, id, rejectedAt: Date.now() };
    await this.scripts.run(
      'deadSetAdd',
      [this.keys.deadSetIndex, this.keys.deadSetEntries],
      [id, JSON.stringify(full), this.bounds.maxSize, this.bounds.maxAge],
    );
    return id;
  }

  /** Entries, newest first (never one older than `maxAge`). */
  async list(options: { offset?: number; limit?: number } = {}): Promise<DeadSetEntry[]> {
    const [, ...values] = await this.read(options.offset ?? 0, options.limit ?? 50);
    return values.map((value) => JSON.parse(value as string) as DeadSetEntry);
  }

  /** One entry, or `undefined`. */
  async get(id: string): Promise<DeadSetEntry | undefined> {
    const value = await this.client.hget(this.keys.deadSetEntries, id);
    return value === null ? undefined : (JSON.parse(value) as DeadSetEntry);
  }

  /** How many entries the set holds (not counting those older than `maxAge`). */
  async size(): Promise<number> {
    const [count] = await this.read(0, 0);
    return count as number;
  }

  private async read(offset: number, limit: number): Promise<(number | string)[]> {
    return (await this.scripts.run(
      'deadSetList',
      [this.keys.deadSetIndex, this.keys.deadSetEntries],
      [offset, limit, this.bounds.maxAge],
    )) as (number | string)[];
  }

  /** Deletes an entry; resolves `false` when there was none. */
  async delete(id: string): Promise<boolean> {
    return (await this.take(id)) !== undefined;
  }

  /**
   * Takes the entry out and enqueues it again (through the uniqueness rules of its queue). Resolves `undefined` when
   * there is no such entry.
   */
  async retry(id: string): Promise<EnqueueResult | undefined> {
    const entry = await this.take(id);
    if (!entry) return undefined;
    try {
      return await this.requeue(entry);
    } catch (error) {
      await this.scripts.run(
        'deadSetAdd',
        [this.keys.deadSetIndex, this.keys.deadSetEntries],
        [entry.id, JSON.stringify(entry), this.bounds.maxSize, this.bounds.maxAge],
      );
      throw error;
    }
  }

  private async take(id: string): Promise<DeadSetEntry | undefined> {
    const value = (await this.scripts.run('deadSetTake', [this.keys.deadSetIndex, this.keys.deadSetEntries], [id])) as
      string | null;
    return value === null ? undefined : (JSON.parse(value) as DeadSetEntry);
  }
}
