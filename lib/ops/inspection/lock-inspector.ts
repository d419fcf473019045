import { discoverQueues, escapeGlob, scanNodes } from '../../redis/scan.js';
import type { Cluster, Redis } from 'ioredis';
import { deduplicationId, digestOfDeduplicationId, UniqueJobsKeys } from '../../redis/keys.js';
import {
  digestPatternMatcher,
  isLockDigest,
  parseDigestPattern,
  parseDigestPrefix,
  parseLockDigest,
} from './digest-format.js';
import { InvalidCursorError } from './errors/invalid-cursor.error.js';
import type {
  HeldLock,
  HeldLockKind,
  HeldLockStorage,
  InspectedQueue,
  LockCounts,
  LockFilter,
  LockInspectorOptions,
  LockOwner,
  LockPage,
  LockPageRequest,
} from './lock-inspection.interface.js';

/** Keys asked of SCAN per call. */
const SCAN_COUNT = 500;
/** SCAN calls one {@link LockInspector.listLocks} call makes at most (then it returns what it found and a cursor). */
const MAX_SCANS_PER_PAGE = 100;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 1000;
/** Characters of job data in {@link LockOwner.dataSummary}. */
const DATA_SUMMARY_LENGTH = 200;
const CURSOR = /^(\d{1,6})\.(\d{1,6})\.(\d{1,20})\.(\d{1,9})$/;

/** A key SCAN found that may hold a lock. */
interface Candidate {
  key: string;
  digest: string;
  storage: HeldLockStorage;
  /** The queue of a deduplication key. */
  queue?: InspectedQueue;
}

/** One key space SCAN walks: a MATCH pattern and how to read the keys it finds. */
interface ScanPhase {
  match: string;
  parse(key: string): Candidate | undefined;
}

interface Position {
  phase: number;
  node: number;
  scan: string;
  skip: number;
}

/**
 * Reads the locks the library holds in Redis, for operators (the CLI, the admin page): lists them with paging, shows
 * one digest with its owner jobs, releases one by hand, and counts them. A plain class on a bare ioredis client (no
 * Nest), read-only except {@link releaseLock}. Every digest given to it is checked to be hex before it reaches a key.
 *
 * Listing is SCAN based and bounded: each call makes at most a fixed number of SCAN calls and returns at most `limit`
 * locks, with a cursor to continue. As with SCAN, a lock that appears or disappears while paging may be missed or
 * seen twice. On Redis Cluster every master is scanned.
 */
export class LockInspector {
  private readonly client: Redis | Cluster;
  private readonly keys: UniqueJobsKeys;
  private readonly queues: readonly InspectedQueue[];
  private readonly ownKey: RegExp;

  constructor(options: LockInspectorOptions) {
    this.client = options.client;
    this.keys = new UniqueJobsKeys(options.prefix);
    this.queues = [...options.queues];
    this.ownKey = new RegExp(`^${escapeRegExp(options.prefix)}:\\{(v\\d+:[0-9a-f]{64})\\}:(queued|expiring|running)$`);
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
    const asked = Math.trunc(Number(page.limit ?? DEFAULT_LIMIT));
    const limit = Number.isFinite(asked) ? Math.min(Math.max(asked, 1), MAX_LIMIT) : DEFAULT_LIMIT;
    const phases = this.phases(filter);
    const position = decodeCursor(page.cursor ?? '0');
    const nodes = scanNodes(this.client);
    const locks: HeldLock[] = [];
    let scans = 0;
    while (position.phase < phases.length && locks.length < limit && scans < MAX_SCANS_PER_PAGE) {
      if (position.node >= nodes.length) {
        Object.assign(position, { phase: position.phase + 1, node: 0, scan: '0', skip: 0 });
        continue;
      }
      const phase = phases[position.phase];
      const [next, keys] = await nodes[position.node].scan(position.scan, 'MATCH', phase.match, 'COUNT', SCAN_COUNT);
      scans++;
      const candidates = [...new Set(keys)]
        .sort()
        .map((key) => phase.parse(key))
        .filter((candidate) => candidate !== undefined);
      let index = position.skip;
      while (index < candidates.length && locks.length < limit) {
        const chunk = candidates.slice(index, index + (limit - locks.length));
        const described = await Promise.all(chunk.map((candidate) => this.describe(candidate, filter, false)));
        locks.push(...described.filter((lock) => lock !== undefined));
        index += chunk.length;
      }
      if (index < candidates.length) {
        position.skip = index; // the page is full in the middle of this batch: the next page scans it again
        break;
      }
      Object.assign(position, next === '0' ? { node: position.node + 1, scan: '0', skip: 0 } : { scan: next, skip: 0 });
    }
    if (position.phase < phases.length && position.node >= nodes.length) {
      Object.assign(position, { phase: position.phase + 1, node: 0, scan: '0', skip: 0 });
    }
    return { locks, cursor: position.phase >= phases.length ? '0' : encodeCursor(position) };
  }

  /**
   * Every key of one digest (general-path enqueue locks, run-time lock, deduplication keys of the inspected queues),
   * with its owner jobs: state, name, creation time and the beginning of their data. `[]` when nothing holds it.
   *
   * @throws InvalidDigestError when `digest` is not `v1:` + 64 hex characters (or the bare hex).
   */
  async showLock(digest: string): Promise<HeldLock[]> {
    const value = parseLockDigest(digest);
    const found = await Promise.all(this.candidatesOf(value).map((candidate) => this.describe(candidate, {}, true)));
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

  /** How many enqueue locks, run-time locks and dead-set entries there are (a full SCAN of the lock keys). */
  async counts(): Promise<LockCounts> {
    const counts: LockCounts = { enqueueLocks: 0, runtimeLocks: 0, deadSet: 0 };
    for (const phase of this.phases({})) {
      for (const node of scanNodes(this.client)) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', phase.match, 'COUNT', 1000);
          cursor = next;
          for (const key of new Set(keys)) {
            const candidate = phase.parse(key);
            if (candidate === undefined) continue;
            if (kindOf(candidate.storage) === 'enqueue') counts.enqueueLocks++;
            else counts.runtimeLocks++;
          }
        } while (cursor !== '0');
      }
    }
    counts.deadSet = await this.client.zcard(this.keys.deadSetIndex);
    return counts;
  }

  // ───────────────────────────── internals ─────────────────────────────

  /** The key spaces to scan for a filter: the library's own lock keys, then each queue's deduplication keys. */
  private phases(filter: LockFilter): ScanPhase[] {
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
    const phases: ScanPhase[] = [];
    phases.push({
      match: `${escapeGlob(this.keys.prefix)}:{${glob}}:${filter.kind === 'runtime' ? 'running' : '*'}`,
      parse: (key) => {
        const match = this.ownKey.exec(key);
        if (!match || !matches(match[1])) return undefined;
        const storage = match[2] as 'queued' | 'expiring' | 'running';
        if (filter.kind !== undefined && kindOf(storage) !== filter.kind) return undefined;
        return { key, digest: match[1], storage };
      },
    });
    if (filter.kind !== 'runtime') {
      for (const queue of this.queues) {
        if (filter.queue !== undefined && queue.name !== filter.queue) continue;
        const base = `${queue.prefix}:${queue.name}:de:`;
        phases.push({
          match: `${escapeGlob(base)}${deduplicationId(glob)}`,
          parse: (key) => {
            const digest = key.startsWith(base) ? digestOfDeduplicationId(key.slice(base.length)) : undefined;
            if (!isLockDigest(digest) || !matches(digest)) return undefined;
            return { key, digest, storage: 'deduplication', queue };
          },
        });
      }
    }
    return phases;
  }

  /** Every key that may hold a lock of a (validated) digest. */
  private candidatesOf(digest: string): Candidate[] {
    return [
      { key: this.keys.enqueueLock(digest), digest, storage: 'queued' },
      { key: this.keys.enqueueLock(digest, 'until_expired'), digest, storage: 'expiring' },
      { key: this.keys.runtimeLock(digest), digest, storage: 'running' },
      ...this.queues.map((queue): Candidate => ({
        key: `${queue.prefix}:${queue.name}:de:${deduplicationId(digest)}`,
        digest,
        storage: 'deduplication',
        queue,
      })),
    ];
  }

  /** Reads a lock key and its owners; `undefined` when it is gone or the filter leaves it out. */
  private async describe(candidate: Candidate, filter: LockFilter, withData: boolean): Promise<HeldLock | undefined> {
    const { key, storage } = candidate;
    let owners: { jobId: string; leaseExpiresAt?: number }[];
    let ttl: number;
    if (storage === 'deduplication') {
      const [holder, pttl] = await Promise.all([this.client.get(key), this.client.pttl(key)]);
      if (holder === null) return undefined;
      owners = [{ jobId: holder }];
      ttl = pttl;
    } else {
      const [members, pttl] = await Promise.all([
        this.client.zrange(key, 0, '-1', 'WITHSCORES'),
        this.client.pttl(key),
      ]);
      owners = [];
      for (let i = 0; i + 1 < members.length; i += 2) {
        owners.push({ jobId: members[i], leaseExpiresAt: Number(members[i + 1]) });
      }
      if (owners.length === 0) return undefined;
      ttl = pttl;
    }
    if (filter.jobId !== undefined && !owners.some((owner) => owner.jobId === filter.jobId)) return undefined;
    const searched = candidate.queue
      ? [candidate.queue]
      : this.queues.filter((queue) => filter.queue === undefined || queue.name === filter.queue);
    const resolved = await Promise.all(owners.map((owner) => this.resolveOwner(owner, candidate, searched, withData)));
    const queue = candidate.queue?.name ?? resolved.find((owner) => owner.queue !== undefined)?.queue;
    if (filter.queue !== undefined && queue !== filter.queue) return undefined;
    return {
      digest: candidate.digest,
      kind: kindOf(storage),
      storage,
      key,
      ...(queue === undefined ? {} : { queue }),
      owners: resolved,
      ...(ttl >= 0 ? { ttlMs: ttl } : {}),
    };
  }

  /**
   * Finds an owner's job in the queues with its state, name and creation time. A sorted-set lock names its owners by
   * job id only, and ids repeat across queues (BullMQ numbers each queue's jobs from 1), so when several queues have a
   * job with that id the best match wins: a job that carries this digest (its deduplication id or the library's
   * marker), then one whose state fits the lock (active for a run-time lock, not finished for an enqueue lock), then the
   * first queue by name.
   */
  private async resolveOwner(
    owner: { jobId: string; leaseExpiresAt?: number },
    candidate: Candidate,
    queues: readonly InspectedQueue[],
    withData: boolean,
  ): Promise<LockOwner> {
    const found = await Promise.all(
      queues.map((queue) => this.readJob(queue, owner.jobId, candidate.digest, withData)),
    );
    let best = -1;
    let bestRank = 0;
    found.forEach((job, index) => {
      if (!job) return;
      const rank = (job.carriesDigest ? 4 : 0) + (fitsLock(candidate.storage, job.owner.jobState) ? 2 : 0) + 1;
      if (rank > bestRank) [best, bestRank] = [index, rank];
    });
    if (best === -1) return { ...owner, jobState: 'missing' };
    return { ...owner, queue: queues[best].name, ...found[best]!.owner };
  }

  /**
   * A job's name, creation time, state (as BullMQ's getState computes it) and data summary, read atomically, and
   * whether it carries `digest`.
   */
  private async readJob(
    queue: InspectedQueue,
    jobId: string,
    digest: string,
    withData: boolean,
  ): Promise<{ owner: Omit<LockOwner, 'jobId'>; carriesDigest: boolean } | undefined> {
    const key = (suffix: string) => `${queue.prefix}:${queue.name}:${suffix}`;
    const fields = ['name', 'timestamp', 'deid', 'opts', ...(withData ? ['data'] : [])];
    // BullMQ's order of precedence (getState): completed, failed, delayed, prioritized, active, wait, paused, children.
    const probes: [string, 'zscore' | 'lpos'][] = [
      ['completed', 'zscore'],
      ['failed', 'zscore'],
      ['delayed', 'zscore'],
      ['prioritized', 'zscore'],
      ['active', 'lpos'],
      ['wait', 'lpos'],
      ['paused', 'lpos'],
      ['waiting-children', 'zscore'],
    ];
    const states = [
      'completed',
      'failed',
      'delayed',
      'prioritized',
      'active',
      'waiting',
      'waiting',
      'waiting-children',
    ];
    const direct = async (): Promise<unknown[]> =>
      Promise.all([
        this.client.hmget(key(jobId), ...fields),
        ...probes.map(([suffix, command]) =>
          command === 'zscore' ? this.client.zscore(key(suffix), jobId) : this.client.lpos(key(suffix), jobId),
        ),
      ]);
    let replies: unknown[] | undefined;
    try {
      // A queue's keys share one slot (BullMQ requires a hash-tagged prefix on Cluster), so one transaction reads all.
      const multi = this.client.multi().hmget(key(jobId), ...fields);
      for (const [suffix, command] of probes) {
        if (command === 'zscore') multi.zscore(key(suffix), jobId);
        else multi.lpos(key(suffix), jobId);
      }
      const answered = await multi.exec();
      if (answered && answered.every(([error]) => !error)) replies = answered.map(([, value]) => value);
    } catch {
      replies = undefined; // e.g. CROSSSLOT on a Cluster whose BullMQ prefix has no hash tag: read without MULTI
    }
    const [hash, ...found] = (replies ?? (await direct())) as [(string | null)[], ...unknown[]];
    const [name, timestamp, deid, opts, data] = hash;
    if (name === null && timestamp === null) return undefined;
    const stateIndex = found.findIndex((value) => value !== null);
    return {
      carriesDigest: deid === deduplicationId(digest) || (opts?.includes(`"digest":"${digest}"`) ?? false),
      owner: {
        jobState: stateIndex === -1 ? 'unknown' : states[stateIndex],
        ...(name === null ? {} : { jobName: name }),
        ...(timestamp === null || !Number.isFinite(Number(timestamp)) ? {} : { since: Number(timestamp) }),
        ...(withData && typeof data === 'string'
          ? { dataSummary: data.length > DATA_SUMMARY_LENGTH ? `${data.slice(0, DATA_SUMMARY_LENGTH)}…` : data }
          : {}),
      },
    };
  }
}

/** Whether a job in this state can hold this kind of lock (a run-time lock: running; an enqueue lock: not finished). */
function fitsLock(storage: HeldLockStorage, state: string | undefined): boolean {
  if (storage === 'running') return state === 'active';
  if (storage === 'expiring') return true;
  return state !== 'completed' && state !== 'failed';
}

function kindOf(storage: HeldLockStorage): HeldLockKind {
  return storage === 'running' ? 'runtime' : 'enqueue';
}

function decodeCursor(cursor: string): Position {
  if (cursor === '0') return { phase: 0, node: 0, scan: '0', skip: 0 };
  const match = CURSOR.exec(cursor);
  if (!match) throw new InvalidCursorError(cursor);
  return { phase: Number(match[1]), node: Number(match[2]), scan: match[3], skip: Number(match[4]) };
}

function encodeCursor(position: Position): string {
  return `${position.phase}.${position.node}.${position.scan}.${position.skip}`;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
