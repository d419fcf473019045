import { hash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { connectedScanNodes, nodeAddress } from '../../redis/scan.js';
import type { HeldLockReader } from './held-lock-reader.js';
import type { Candidate } from './job-owners.js';
import type { HeldLock, LockFilter, LockPage, LockPageRequest } from './lock-inspection.interface.js';
import { decodeCursor, encodeCursor, topologyOf } from './page-cursor.js';

/** Keys asked of SCAN per call at most (a batch with more locks than a page has room for is asked again with fewer). */
export const SCAN_COUNT = 1000;
/** SCAN calls one {@link LockPages.list} call makes at most (then it returns what it found and a cursor). */
const MAX_SCANS_PER_PAGE = 200;
/** Lock reads (and a job-id filter's screens, apart) one {@link LockPages.list} call keeps for keys it may scan again. */
const MAX_READS_KEPT = 10_000;
/** Locks a page with a job-id filter screens at once at most (see {@link LockPages.readBatch}). */
const JOB_ID_SCREENS = 256;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 1000;

/**
 * One SCAN batch's reading: from which listing order, for which filter, how many locks at most, and whether it may be
 * listed in part (split: its first `room` locks read even when more match).
 */
interface BatchRequest {
  from: number;
  filter: LockFilter;
  room: number;
  partial: boolean;
}

/** What {@link LockPages.readBatch} read of a batch (see there). */
type BatchRead =
  { fits: true; locks: HeldLock[] } | { fits: false; locks: HeldLock[]; estimate: number; firstLeft: number };

/** The key space a listing walks: one MATCH pattern and how to read the keys it finds. */
export interface ScanPlan {
  match: string;
  parse(key: string): Candidate | undefined;
}

/**
 * Pages of held locks over SCAN (`LockInspector.listLocks`): each page holds whole SCAN batches, bounded in SCAN calls
 * and locks, with a cursor to go on (see page-cursor.ts).
 */
export class LockPages {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly reader: HeldLockReader,
  ) {}

  /** One page of the locks `plan` finds that pass `filter` (see `LockInspector.listLocks`). */
  async list(plan: ScanPlan, filter: LockFilter, page: LockPageRequest): Promise<LockPage> {
    const asked = Math.trunc(Number(page.limit ?? DEFAULT_LIMIT));
    const limit = Number.isFinite(asked) ? Math.min(Math.max(asked, 1), MAX_LIMIT) : DEFAULT_LIMIT;
    const nodes = await connectedScanNodes(this.client);
    const topology = topologyOf(this.client.isCluster ? nodes.map(nodeAddress) : undefined);
    const position = decodeCursor(page.cursor ?? '0', topology);
    const locks: HeldLock[] = [];
    // A page holds whole SCAN batches: it cannot resume within one reliably, for SCAN's COUNT counts every key it
    // looks at, so the same cursor's batch reaches further once other keys are gone, and changes on every page of a
    // busy Redis. A batch with more locks than the page has room for is scanned again with a smaller COUNT (fewer keys
    // looked at); only one of COUNT 1 (a hash bucket) that holds more than the room left is split.
    let count = position.skip > 0 ? 1 : SCAN_COUNT;
    let scans = 0;
    // The locks read since the last batch of the whole COUNT that fitted: a batch too big for the page is scanned again
    // with a smaller COUNT and the batches after it go over the rest of its keys (at most MAX_READS_KEPT kept).
    const read = new Map<string, Promise<HeldLock | undefined>>();
    const screened = new Map<string, Promise<boolean>>(); // a job-id filter's first read of each lock, kept as `read`
    while (position.node < nodes.length && locks.length < limit && scans < MAX_SCANS_PER_PAGE) {
      const [next, keys] = await nodes[position.node].scan(position.scan, 'MATCH', plan.match, 'COUNT', count);
      scans++;
      // A split batch scanned again lists only what it did not list before, provided it is the same batch (it ends at
      // the same cursor); otherwise it is listed whole (a lock may be listed twice, as SCAN's own may).
      const from = position.skip > 0 && next === position.end ? position.skip : 0;
      const room = limit - locks.length;
      const batch = await this.readBatch(plan, keys, { from, filter, room, partial: count === 1 }, read, screened);
      // COUNTs aim at 2/3 of the room (by the last batch's locks per key looked at): SCAN's batches vary in size.
      if (batch.fits) {
        locks.push(...batch.locks);
        const after = next === '0' ? { node: position.node + 1, scan: '0' } : { scan: next };
        Object.assign(position, after, { skip: 0, end: undefined });
        if (count === SCAN_COUNT || read.size > MAX_READS_KEPT || screened.size > MAX_READS_KEPT) {
          read.clear();
          screened.clear();
        }
        const left = limit - locks.length;
        count = clamp(batch.locks.length === 0 ? count * 2 : Math.floor((left * count) / batch.locks.length / 1.5));
      } else if (count > 1) {
        count = Math.min(Math.floor(count / 2), clamp(Math.floor((room * count) / batch.estimate / 1.5)));
      } else {
        // One hash bucket holds more locks than the page has room for: list the first in an order of their own (not
        // their place in the batch, which shifts as keys go), and scan it again from the first not listed (`skip`).
        locks.push(...batch.locks);
        Object.assign(position, { skip: batch.firstLeft, end: next });
        break;
      }
    }
    return { locks, cursor: position.node >= nodes.length ? '0' : encodeCursor(position, topology) };
  }

  /**
   * The locks of one SCAN batch whose listing order is `from` or later, read in that order (each key once in `read`)
   * until `room` are found. `fits`: every one was read. Otherwise `locks` are its first `room`, `firstLeft` is the order
   * of the first not read and `estimate` how many locks the batch holds, judged from those read; but unless it may be
   * listed in `partial`, none is read when more keys than the room match a filter every held lock passes (no owner job
   * or queue asked). With a job-id filter each key is screened first on one read (each once in `screened`), and only
   * those that pass are read whole.
   */
  private async readBatch(
    plan: ScanPlan,
    keys: string[],
    batch: BatchRequest,
    read: Map<string, Promise<HeldLock | undefined>>,
    screened: Map<string, Promise<boolean>>,
  ): Promise<BatchRead> {
    const { from, filter, room } = batch;
    const candidates = [...new Set(keys)]
      .map((key) => plan.parse(key))
      .filter((candidate) => candidate !== undefined)
      .map((candidate) => ({ candidate, order: listingOrder(candidate.key) }))
      .filter(({ order }) => order >= from)
      .sort((a, b) => a.order - b.order);
    if (!batch.partial && candidates.length > room && filter.jobId === undefined && filter.queue === undefined) {
      return { fits: false, locks: [], estimate: candidates.length, firstLeft: candidates[0].order };
    }
    const locks: HeldLock[] = [];
    let index = 0;
    // With a job-id filter, which most locks fail, the candidates ahead are first screened on one read each
    // (`screened`), as many as are wanted and twice as many each time too few locks were found (at most JOB_ID_SCREENS).
    let ahead = Math.min(room, JOB_ID_SCREENS);
    while (index < candidates.length && locks.length < room) {
      const wanted = room - locks.length;
      let end = Math.min(candidates.length, index + wanted);
      let passes: boolean[] | undefined;
      if (filter.jobId !== undefined) {
        const { jobId } = filter;
        const span = candidates.slice(index, index + ahead);
        passes = await Promise.all(
          span.map(({ candidate }) => kept(screened, candidate.key, () => this.reader.mayHold(candidate, jobId))),
        );
        let passed = 0;
        for (end = index; end < index + span.length && passed < wanted; end++) if (passes[end - index]) passed++;
      }
      while (end < candidates.length && candidates[end].order === candidates[end - 1].order) end++; // no tie split
      const chunk = candidates
        .slice(index, end)
        .filter((_, i) => passes === undefined || i >= passes.length || passes[i])
        .map(({ candidate }) => candidate);
      const described = await Promise.all(
        chunk.map((candidate) => kept(read, candidate.key, () => this.reader.describe(candidate, filter, false))),
      );
      const found = described.filter((lock) => lock !== undefined);
      locks.push(...found);
      index = end;
      // Grown on the locks found (a lock that passes the screen may still fail a queue filter).
      if (passes !== undefined && found.length < wanted) ahead = Math.min(ahead * 2, JOB_ID_SCREENS);
    }
    if (index === candidates.length) return { fits: true, locks };
    return {
      fits: false,
      locks,
      estimate: (candidates.length * locks.length) / index,
      firstLeft: candidates[index].order,
    };
  }
}

/** What `map` holds for `key`, else `make()`, kept there (each lock read or screened once a listing call). */
function kept<T>(map: Map<string, T>, key: string, make: () => T): T {
  const value = map.get(key) ?? make();
  map.set(key, value);
  return value;
}

/** A key's place in a page's batch: 48 bits of its sha256 (an integer a cursor holds; ties are never split). */
function listingOrder(key: string): number {
  return Number.parseInt(hash('sha256', key, 'hex').slice(0, 12), 16);
}

/** A SCAN COUNT between 1 and {@link SCAN_COUNT}. */
function clamp(count: number): number {
  return Math.min(Math.max(count, 1), SCAN_COUNT);
}
