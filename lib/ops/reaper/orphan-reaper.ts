import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { IdempotencyStore } from '../../idempotency/idempotency-store.interface.js';
import { BulksInProgress } from '../../locks/bulks-in-progress.js';
import { LockStore } from '../../locks/lock-store.js';
import { UniqueJobsKeys } from '../../redis/keys.js';
import { QUEUE_REGISTRY_LIMIT, QueueRegistry } from '../../redis/queue-registry.js';
import { RedisScripts } from '../../redis/redis-scripts.js';
import type { ReapedItem, ReaperOptions, ReaperQueue, ReapReport } from './reap-report.interface.js';
import { ReaperKeyInspector } from './key-inspector.js';
import { ReaperPass } from './reaper-pass.js';
import { MAX_SUSPECTS, SuspectConfirmation, type Suspect } from './suspect-confirmation.js';

/** What the reaper needs: the library's Redis and prefix, and where to find the jobs that own locks. */
export interface OrphanReaperDeps {
  /** The library's Redis client (the one the locks live on). */
  client: Redis | Cluster;
  /** The library's key prefix. */
  prefix: string;
  /** Queues the application knows, asked at the start of each pass. */
  queues?: () => readonly ReaperQueue[];
  /** Idempotency stores whose `prune` each run calls (in every process, leader or not). */
  stores?: () => readonly IdempotencyStore[];
  /** Tuning (see {@link ReaperOptions}). */
  options?: Omit<ReaperOptions, 'interval'>;
  /** How long one run's leadership lasts unless the next run extends it (ms). Default 30,000. */
  leaderTtl?: number;
  /**
   * Suspects a run collects before it stops scanning and confirms them (after one grace). Default 1,000: an
   * application's reaper spreads the work over its runs; an operator's one-off run can take more at once.
   */
  maxSuspects?: number;
  /** Called for every item released (not in dry runs). */
  onReaped?: (item: ReapedItem) => void;
}

const MAX_ITEMS = 1000;
/** A dry run starts a new pass when the last dry run is older than this: it would not know queues created since. */
const DRY_PASS_IDLE_MS = 60_000;

/** How long one run may prune the SQL stores (ms): at the default interval, half of every minute at most. */
const PRUNE_BUDGET_MS = 30_000;

/** Default `grace`: far above the time between a general-path lock and its add (one round trip). */
const DEFAULT_GRACE = 15_000;

/**
 * Finds and releases what crashes and hand-removed jobs leave behind: general-path enqueue locks and idempotency claims
 * whose job is gone or finished, BullMQ deduplication keys (fast-path enqueue locks) whose job is gone or finished, and
 * lock leases that ended. Only one process works at a time (a leased leadership lock); each run SCANs in steps of
 * `batchSize` for at most `timeBudget` ms and the next run goes on where it stopped, so no call walks the keyspace
 * at once. Every release is compare-and-set: a lock re-taken or renewed meanwhile is left alone.
 */
export class OrphanReaper {
  private readonly scripts: RedisScripts;
  private readonly locks: LockStore;
  private readonly keys: UniqueJobsKeys;
  private readonly token = `reaper-${randomBytes(9).toString('base64url')}`;
  private readonly batchSize: number;
  private readonly timeBudget: number;
  private readonly grace: number;
  private readonly maxSuspects: number;
  /** Confirms the scheduled runs' suspects (and keeps back those a large bulk may own). */
  private readonly confirmation: SuspectConfirmation;
  /** Where the scheduled runs' walk stands, and where the dry runs' does. */
  private readonly passes: { scheduled: ReaperPass; dry: ReaperPass };
  /** Looks at each key a run's scan finds. */
  private readonly inspector: ReaperKeyInspector;
  /** Aborted by {@link interrupt}: a run waiting out its grace stops there. */
  private readonly stopping = new AbortController();

  constructor(private readonly deps: OrphanReaperDeps) {
    this.scripts = new RedisScripts(deps.client);
    this.locks = new LockStore(this.scripts);
    this.keys = new UniqueJobsKeys(deps.prefix);
    this.inspector = new ReaperKeyInspector(deps.client, deps.prefix, this.scripts, this.locks, this.keys);
    this.batchSize = deps.options?.batchSize ?? 500;
    this.timeBudget = deps.options?.timeBudget ?? 1000;
    this.grace = deps.options?.grace ?? DEFAULT_GRACE;
    this.maxSuspects = deps.maxSuspects ?? MAX_SUSPECTS;
    this.confirmation = new SuspectConfirmation(new BulksInProgress(this.locks, this.keys), {
      grace: this.grace,
      batchSize: this.batchSize,
      maxKept: this.maxSuspects,
    });
    const knownQueues = () => [...(deps.queues?.() ?? []), ...(deps.options?.queues ?? [])];
    const registry = async () => {
      const names = await QueueRegistry.read(deps.client, this.keys);
      return { names, full: names.length >= QUEUE_REGISTRY_LIMIT };
    };
    this.passes = {
      scheduled: new ReaperPass(deps.client, this.batchSize, knownQueues, registry),
      dry: new ReaperPass(deps.client, this.batchSize, knownQueues, registry),
    };
  }

  /**
   * One run: takes (or extends) the leadership, scans for at most the time budget, re-checks what it suspects after
   * the grace period, releases it, and prunes the SQL stores. A dry run reports what it would release (without the
   * grace re-check) and changes nothing, needing no leadership; it walks a pass of its own (never moving the scheduled runs' one), going on
   * where the previous dry run stopped when that was less than a minute ago, else from the start.
   */
  async run(options: { dryRun?: boolean } = {}): Promise<ReapReport> {
    const dryRun = options.dryRun ?? false;
    const startedAt = performance.now();
    const report: ReapReport = {
      startedAt: Date.now(),
      durationMs: 0,
      dryRun,
      leader: true,
      complete: false,
      interrupted: false,
      scannedKeys: 0,
      failedKeys: 0,
      deferred: 0,
      reaped: { enqueueLocks: 0, deduplicationKeys: 0, runtimeLeases: 0, idempotencyClaims: 0, sqlRecords: 0 },
      items: [],
    };
    const leaderTtl = Math.max(this.deps.leaderTtl ?? 30_000, this.timeBudget + this.grace + 10_000);
    // A dry run changes nothing: it needs no leadership (an application whose reaper is on keeps it while it runs).
    if (!dryRun && !(await this.locks.acquire(this.keys.reaperLeader, this.token, leaderTtl, 1)).acquired) {
      report.leader = false;
      // The SQL stores are pruned by every process that has them, leader or not: the leader (one per library prefix)
      // may be a process without them (an API process, a worker of other queues). Concurrent prunes skip each other's
      // rows (PostgreSQL: SKIP LOCKED).
      report.reaped.sqlRecords = await this.prune();
      report.durationMs = performance.now() - startedAt;
      return report;
    }
    const pass = dryRun ? this.passes.dry : this.passes.scheduled;
    const serverNow = await this.serverClock();
    const deadline = startedAt + this.timeBudget;
    const suspects: Suspect[] = [];
    const record = (item: ReapedItem) => {
      report.reaped[countOf(item.kind)] += 1;
      if (report.items.length < MAX_ITEMS) report.items.push(item);
      if (!dryRun) this.deps.onReaped?.(item);
    };
    const failed = (error: unknown) => {
      report.failedKeys += 1;
      report.firstFailure ??= error instanceof Error ? error.message : String(error);
    };
    do {
      // A dry run goes on where the last one stopped only if that was a moment ago (an operator's run after run).
      const found = await pass.next(dryRun ? DRY_PASS_IDLE_MS : Infinity);
      report.scannedKeys += found.length;
      await Promise.all(
        found.map((key) =>
          this.inspector.inspect(key, pass, dryRun, record, suspects, serverNow).catch((error: unknown) => {
            failed(error); // one odd key must not cost the run what it found
          }),
        ),
      );
      // Confirming suspects costs calls too: a run that found many stops scanning and leaves the rest to the next.
      if (performance.now() >= deadline || suspects.length >= this.maxSuspects) break;
    } while (!pass.complete);
    report.complete = pass.complete;

    if (dryRun) {
      await this.confirmation.preview(suspects, report, record);
    } else {
      const confirmed = await this.confirmation.confirm(
        suspects,
        pass,
        report,
        { record, failed },
        this.stopping.signal,
      );
      if (!confirmed) {
        report.interrupted = true;
        report.durationMs = performance.now() - startedAt;
        return report;
      }
    }
    if (!dryRun) report.reaped.sqlRecords = await this.prune();
    if (!dryRun) await this.locks.acquire(this.keys.reaperLeader, this.token, leaderTtl, 1);
    report.durationMs = performance.now() - startedAt;
    return report;
  }

  /**
   * Cuts short the grace period a run in progress waits out before confirming its suspects (shutdown: else a close
   * waits up to `grace`, 15 s by default, whatever `shutdownTimeout` says); that run releases nothing more, and so does
   * every later run of this reaper. The orphans are found again by the next process's runs.
   */
  interrupt(): void {
    this.stopping.abort();
  }

  /** Gives the leadership up (shutdown), so another process takes over at its next run. */
  async resign(): Promise<void> {
    await this.locks.release(this.keys.reaperLeader, this.token);
  }

  /**
   * Redis' clock (ms), which wrote the leases' ends: read once per run (TIME) and carried on the monotonic clock. Not the
   * process's wall clock: a reaper on a machine whose clock runs behind would never see an orphaned claim's lease end
   * (the release script checks the lease again on the record's own server, so a clock read a little early only defers
   * a release to the next run). The process's clock when TIME is refused (an ACL without it).
   */
  private async serverClock(): Promise<() => number> {
    const sentAt = performance.now();
    const time = await this.deps.client.time().catch(() => undefined);
    if (!time) return () => Date.now();
    const server = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    return () => server + (performance.now() - sentAt);
  }

  /**
   * Prunes the SQL stores in batches of `batchSize` until they have nothing more to prune, for at most
   * {@link PRUNE_BUDGET_MS} a run (the next run goes on), and no further once the reaper is stopping. A budget of its
   * own, not the scan's `timeBudget`: a run that spent that on Redis would prune one batch, fewer rows a minute than a
   * busy application's keys expire, and the table would grow without bound.
   */
  private async prune(): Promise<number> {
    const deadline = performance.now() + PRUNE_BUDGET_MS;
    let total = 0;
    for (const store of new Set(this.deps.stores?.() ?? [])) {
      if (!store.prune) continue;
      let deleted: number;
      do {
        deleted = await store.prune(this.batchSize);
        total += deleted;
      } while (deleted === this.batchSize && performance.now() < deadline && !this.stopping.signal.aborted);
    }
    return total;
  }
}

function countOf(kind: ReapedItem['kind']): keyof Omit<ReapReport['reaped'], 'sqlRecords'> {
  return (
    {
      enqueueLock: 'enqueueLocks',
      deduplicationKey: 'deduplicationKeys',
      runtimeLease: 'runtimeLeases',
      idempotencyClaim: 'idempotencyClaims',
    } as const
  )[kind];
}
