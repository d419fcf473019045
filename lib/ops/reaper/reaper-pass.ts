import type { Cluster, Redis } from 'ioredis';
import { bullKeys } from '../../redis/keys.js';
import { ownerNamesQueue, type RuntimeLockOwner } from '../../redis/runtime-lock-owner.js';
import { connectedScanNodes, discoverQueueNames } from '../../redis/scan.js';
import type { ReaperQueue } from './reap-report.interface.js';

/**
 * One SCAN stream of a pass: one walk over one Redis node's keys, classified by the reaper (a MATCH per kind of key
 * would walk the whole key space once per kind: SCAN visits every key whatever it matches).
 */
interface ScanStream {
  node: Redis;
  cursor: string;
}

/** The deduplication keys of one queue: their start, and the queue's job key prefix (`<prefix>:<queue>:`). */
export interface DeduplicationSpace {
  keyStart: string;
  jobKeyPrefix: string;
}

/**
 * Where one walk of the reaper over the key space stands: a pass spans runs when the time budget ends a run first, and
 * the next run goes on where it stopped. Scheduled runs and dry runs each keep their own, so a dry run neither skips
 * keys of the scheduled walk nor shows where it stands.
 */
export class ReaperPass {
  /** SCAN streams left of the current pass, one per node. */
  private streams: ScanStream[] = [];
  /** The queues whose deduplication keys the current pass looks at. */
  private spaces: DeduplicationSpace[] = [];
  /**
   * Every queue on the server (qualified names), found once per pass and only when a general-path lock needs it (and
   * again before suspects are confirmed when the registry cannot help). The promise itself is kept, so the owners of
   * one batch, checked at once, share one discovery.
   */
  private discovered: Promise<string[]> | undefined;
  /** Queues the library's registry named at the last {@link refreshQueues} that the discovery had not found. */
  private registered: Promise<readonly string[]> | undefined;
  /** The queues this application vouches for, read once a pass ({@link vouchedNames}). */
  private vouched: Promise<Set<string> | 'all'> | undefined;
  /** When a batch was last read. */
  private readAt = 0;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly batchSize: number,
    /** Queues the application knows, asked at the start of each pass. */
    private readonly knownQueues: () => readonly ReaperQueue[],
    /**
     * The queues every process on the library prefix guards (its queue registry), as qualified names, and whether the
     * registry is full (then it may miss some).
     */
    private readonly readRegistry: () => Promise<{ names: readonly string[]; full: boolean }>,
  ) {}

  /** Whether the last walk ended (the next {@link next} starts a new one). */
  get complete(): boolean {
    return this.streams.length === 0;
  }

  /**
   * The next batch of keys: from where the pass stands, or from the start of a new pass when the last one ended (or
   * when it was last read more than `maxIdleMs` ago: what it knew of the queues may be out of date).
   */
  async next(maxIdleMs = Infinity): Promise<string[]> {
    const now = Date.now();
    if (this.streams.length === 0 || now - this.readAt > maxIdleMs) await this.start();
    this.readAt = now;
    const stream = this.streams[0];
    if (!stream) return []; // no node to scan (a cluster that knows no master): an empty, complete pass
    const [cursor, found] = await stream.node.scan(stream.cursor, 'COUNT', this.batchSize).catch((error: unknown) => {
      // A node that failed (or left the cluster) must not pin the pass: the next run starts a fresh one.
      this.streams = [];
      throw error;
    });
    stream.cursor = cursor;
    if (cursor === '0') this.streams.shift();
    return found;
  }

  /** The known queue whose deduplication keys `key` is one of, if any. */
  deduplicationSpaceOf(key: string): DeduplicationSpace | undefined {
    return this.spaces.find((space) => key.startsWith(space.keyStart));
  }

  /**
   * Queues whose jobs may own a general-path lock, which records only its owner's job id: the known ones and every
   * BullMQ queue on the server, whatever its prefix (another application sharing the library prefix, a `{bull}`
   * prefix on a cluster). An owner is "gone" only when no queue on the server holds its job.
   */
  async queueNames(): Promise<string[]> {
    // First the registry's answer: when it was full or unreadable, it has dropped the discovery to do it again.
    const registered = (await this.registered) ?? [];
    this.discovered ??= discoverQueueNames(this.client, this.batchSize).catch((error: unknown) => {
      this.discovered = undefined;
      throw error;
    });
    return [...new Set([...this.knownNames(), ...(await this.discovered), ...registered])];
  }

  /**
   * The queues a run-time lock owner names ({@link RuntimeLockOwner}): the one it names by name (an earlier build's
   * owner of a lock across queues); those whose tag it carries, among the queues this application knows, else among
   * every queue on the server (the discovery, only then); `undefined` for a bare id (an earlier build's: every queue).
   */
  async queuesNamedBy(owner: RuntimeLockOwner): Promise<string[] | undefined> {
    if (owner.queue !== undefined) return [owner.queue];
    if (owner.queueTag === undefined) return undefined;
    const named = (names: readonly string[]) => names.filter((name) => ownerNamesQueue(owner, name));
    const known = named(this.knownNames());
    return known.length > 0 ? known : named(await this.queueNames());
  }

  /**
   * Called before suspects are confirmed, since a pass's discovery may be minutes old: reads the library's queue
   * registry (one SMEMBERS), where another process on the library prefix records a queue at its bootstrap or first
   * enqueue, well before the grace period ends. Its names that neither this application knows nor the discovery found
   * are searched too, when their queue exists (one EXISTS of its `meta` key each, so stale names cost nothing more).
   * A registry that is full (it may miss queues) or that cannot be read: the queues are discovered again instead.
   */
  refreshQueues(): void {
    this.vouched = undefined;
    this.registered = this.newlyRegistered().catch(() => {
      this.discovered = undefined;
      return [];
    });
  }

  private async newlyRegistered(): Promise<string[]> {
    if (!this.discovered) return []; // the discovery still to come finds every queue
    const { names, full } = await this.readRegistry();
    if (full) throw new Error('the queue registry is full');
    const seen = new Set([...this.knownNames(), ...(await this.discovered)]);
    const fresh = names.filter((name) => !seen.has(name));
    const found = await Promise.all(fresh.map((name) => this.client.exists(bullKeys.meta(name))));
    return fresh.filter((_, i) => found[i] === 1);
  }

  /**
   * The queues this application vouches for: its own and those in the library's registry (read once a pass, when first
   * asked). `'all'` when the registry cannot be read or is full (it may miss some): then no queue is taken for another
   * application's. A queue only discovered may be another application's, on a shared server.
   */
  vouchedNames(): Promise<Set<string> | 'all'> {
    this.vouched ??= this.readRegistry().then(
      ({ names, full }) => (full ? 'all' : new Set([...this.knownNames(), ...names])),
      () => 'all' as const,
    );
    return this.vouched;
  }

  private knownNames(): string[] {
    return this.knownQueues().map((queue) => bullKeys.qualifiedName(queue.prefix, queue.name));
  }

  private async start(): Promise<void> {
    const nodes = await connectedScanNodes(this.client);
    const byName = new Map(
      this.knownQueues().map((queue) => [bullKeys.qualifiedName(queue.prefix, queue.name), queue]),
    );
    this.spaces = [...byName.keys()].map((qualifiedName) => ({
      keyStart: bullKeys.deduplicationBase(qualifiedName),
      jobKeyPrefix: bullKeys.queueKeyPrefix(qualifiedName),
    }));
    this.streams = nodes.map((node) => ({ node, cursor: '0' }));
    this.discovered = undefined;
    this.registered = undefined;
    this.vouched = undefined;
  }
}
