import { connectedScanNodes, discoverQueues } from '../../redis/scan.js';
import type { Cluster, Redis } from 'ioredis';
import { bullKeys, KEY_SHAPES, KEY_SUFFIX, UniqueJobsKeys } from '../../redis/keys.js';
import { digestPatternMatcher, parseDigestPattern, parseDigestPrefix, parseLockDigest } from './digest-format.js';
import { HeldLockReader, kindOf } from './held-lock-reader.js';
import type { Candidate } from './job-owners.js';
import { LockPages, SCAN_COUNT, type ScanPlan } from './lock-pages.js';
import type {
  HeldLock,
  HeldLockKind,
  InspectedQueue,
  LockCountOptions,
  LockCounts,
  LockFilter,
  LockInspectorOptions,
  LockPage,
  LockPageRequest,
} from './lock-inspection.interface.js';

/** SCAN calls one {@link LockInspector.counts} call makes at most by default (over every node together). */
const DEFAULT_COUNT_SCANS = 200;

/**
 * Reads the locks the library holds in Redis, for operators (the CLI, the admin page): lists them with paging, shows
 * one digest with its owner jobs, releases one by hand, and counts them. A plain class on a bare ioredis client (no
 * Nest), read-only except {@link releaseLock}. Every digest given to it is checked to be hex before it reaches a key.
 *
 * Listing is SCAN based and bounded: each call makes at most a fixed number of SCAN calls and returns at most `limit`
 * locks, with a cursor to continue. As with SCAN, a lock that appears or disappears while paging may be missed or
 * seen twice; one held throughout is listed (rarely twice). On Redis Cluster every master is scanned. Each lock lists
 * at most 20 (`MAX_OWNERS_PER_LOCK`) of its owners and counts the others ({@link HeldLock.moreOwners}), so a lock's
 * cost does not grow with its holders.
 */
export class LockInspector {
  private readonly client: Redis | Cluster;
  private readonly keys: UniqueJobsKeys;
  private readonly queues: readonly InspectedQueue[];
  private readonly reader: HeldLockReader;
  private readonly pages: LockPages;

  constructor(options: LockInspectorOptions) {
    this.client = options.client;
    this.keys = new UniqueJobsKeys(options.prefix);
    this.queues = [...options.queues];
    this.reader = new HeldLockReader(options.client, this.queues, this.keys);
    this.pages = new LockPages(options.client, this.reader);
  }

  /**
   * The BullMQ queues under a prefix, found by their `<bullPrefix>:<name>:meta` key (written when a queue or worker
   * starts). Sorted by name.
   */
  static discoverQueues(client: Redis | Cluster, bullPrefix = 'bull'): Promise<InspectedQueue[]> {
    return discoverQueues(client, bullPrefix);
  }

  /**
   * One page of held locks matching `filter`. Pass the returned `cursor` back with the same filter for the next page;
   * `'0'` means done. A page may hold fewer than `limit` locks (even none) before the end: the scan work per call is
   * bounded.
   *
   * @throws InvalidDigestError when `filter.digest` or `filter.pattern` is not hex.
   * @throws InvalidCursorError when `page.cursor` was not returned by this method.
   */
  async listLocks(filter: LockFilter = {}, page: LockPageRequest = {}): Promise<LockPage> {
    return this.pages.list(this.plan(filter), filter, page);
  }

  /**
   * Every key of one digest (general-path enqueue locks, run-time lock, deduplication keys of the inspected queues),
   * with its owner jobs: state, name, creation time and the beginning of their data (at most 20 owners a key, the
   * others counted in {@link HeldLock.moreOwners}). `[]` when nothing holds it.
   *
   * @throws InvalidDigestError when `digest` is not `v1:` + 64 hex characters (or the bare hex).
   */
  async showLock(digest: string): Promise<HeldLock[]> {
    const value = parseLockDigest(digest);
    const found = await Promise.all(
      this.candidatesOf(value).map((candidate) => this.reader.describe(candidate, {}, true)),
    );
    return found.filter((lock) => lock !== undefined);
  }

  /**
   * Deletes the keys of a digest's locks (both kinds, or only `kind`), whoever holds them: the next enqueue or start
   * of that digest takes the lock anew. Resolves how many keys were removed.
   *
   * @throws InvalidDigestError when `digest` is not `v1:` + 64 hex characters (or the bare hex).
   */
  async releaseLock(digest: string, kind?: HeldLockKind): Promise<number> {
    const value = parseLockDigest(digest);
    const keys = this.candidatesOf(value)
      .filter((candidate) => kind === undefined || kindOf(candidate.storage) === kind)
      .map((candidate) => candidate.key);
    // One DEL per key: on Redis Cluster the keys live in different slots.
    const removed = await Promise.all(keys.map((key) => this.client.del(key)));
    return removed.reduce((sum, n) => sum + n, 0);
  }

  /**
   * How many enqueue locks, run-time locks and dead-set entries there are: one SCAN pass over the lock keys and the
   * inspected queues' deduplication keys, bounded by `options.maxScans` calls. On a larger key space it stops there
   * and says so (`complete: false`, the lock counts are lower bounds): a count never walks a million keys.
   */
  async counts(options: LockCountOptions = {}): Promise<LockCounts> {
    const counts: LockCounts = { enqueueLocks: 0, runtimeLocks: 0, deadSet: 0, complete: true };
    let budget = options.maxScans === Infinity ? Infinity : positiveInteger(options.maxScans, DEFAULT_COUNT_SCANS);
    const scanCount = positiveInteger(options.scanCount, SCAN_COUNT);
    const plan = this.plan({});
    scan: for (const node of await connectedScanNodes(this.client)) {
      let cursor = '0';
      do {
        if (budget-- <= 0) {
          counts.complete = false;
          break scan;
        }
        const [next, keys] = await node.scan(cursor, 'MATCH', plan.match, 'COUNT', scanCount);
        cursor = next;
        // A key SCAN returns twice in one call counts once; across calls (keys moving during a rehash) it may count twice.
        for (const key of new Set(keys)) {
          const candidate = plan.parse(key);
          if (candidate === undefined) continue;
          if (kindOf(candidate.storage) === 'enqueue') counts.enqueueLocks++;
          else counts.runtimeLocks++;
        }
      } while (cursor !== '0');
    }
    counts.deadSet = await this.client.zcard(this.keys.deadSetIndex);
    return counts;
  }

  // ───────────────────────────── internals ─────────────────────────────

  /**
   * What to scan for a filter: ONE pass over the key space that sees the library's lock keys
   * (`<prefix>:{<digest>}:<suffix>`) and the inspected queues' deduplication keys (`…:de:uj:<digest>`) together, so
   * the first page lists locks whichever kind fills the Redis (a pass per kind made the first pages empty while a
   * million deduplication keys waited behind the library's own). The MATCH keeps both shapes (a digest right after
   * `{` or `:`); the parser keeps only this prefix's keys and the inspected queues'.
   */
  private plan(filter: LockFilter): ScanPlan {
    let glob = '*';
    let matches: (digest: string) => boolean = () => true;
    if (filter.pattern !== undefined) {
      glob = parseDigestPattern(filter.pattern); // runs of `*` collapsed: also the pattern Redis's MATCH gets
      matches = digestPatternMatcher(glob);
    }
    if (filter.digest !== undefined) {
      const prefix = parseDigestPrefix(filter.digest);
      if (filter.pattern === undefined) glob = `${prefix}*`;
      const previous = matches;
      matches = (digest) => digest.startsWith(prefix) && previous(digest);
    }
    const own = (key: string): Candidate | undefined => {
      const match = KEY_SHAPES.lock.exec(key);
      if (!match || match[1] !== this.keys.prefix || !matches(match[2])) return undefined;
      const storage = match[3] as 'queued' | 'expiring' | 'running';
      if (filter.kind !== undefined && kindOf(storage) !== filter.kind) return undefined;
      return { key, digest: match[2], storage };
    };
    const queues = new Map(
      this.queues
        .filter((queue) => filter.queue === undefined || queue.name === filter.queue)
        .map((queue) => [bullKeys.deduplicationBase(bullKeys.qualifiedName(queue.prefix, queue.name)), queue]),
    );
    if (filter.kind === 'runtime' || queues.size === 0) {
      const suffix = filter.kind === 'runtime' ? KEY_SUFFIX.running : '*';
      return { match: this.keys.pattern(glob, suffix), parse: own };
    }
    return {
      match: `*[{:]${glob === '*' ? 'v[0-9]' : glob}*`,
      parse: (key) => {
        const dedup = KEY_SHAPES.deduplication.exec(key);
        if (!dedup) return own(key);
        const queue = queues.get(key.slice(0, key.length - dedup[3].length));
        if (!queue || !matches(dedup[3])) return undefined;
        return { key, digest: dedup[3], storage: 'deduplication', queue };
      },
    };
  }

  /** Every key that may hold a lock of a (validated) digest. */
  private candidatesOf(digest: string): Candidate[] {
    return [
      { key: this.keys.enqueueLock(digest), digest, storage: 'queued' },
      { key: this.keys.enqueueLock(digest, 'until_expired'), digest, storage: 'expiring' },
      { key: this.keys.runtimeLock(digest), digest, storage: 'running' },
      ...this.queues.map((queue): Candidate => ({
        key: bullKeys.deduplication(bullKeys.qualifiedName(queue.prefix, queue.name), digest),
        digest,
        storage: 'deduplication',
        queue,
      })),
    ];
  }
}

/** `value` truncated when it is a finite number ≥ 1, else `fallback`. */
function positiveInteger(value: number | undefined, fallback: number): number {
  const n = Math.trunc(Number(value ?? fallback));
  return Number.isFinite(n) && n >= 1 ? n : fallback;
}
