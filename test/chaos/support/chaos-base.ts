// What the two fault-injection worlds share (ChaosRun in ./harness.ts, FleetRun in ./fleet.ts): the private Redis and
// the PostgreSQL pool, worker processes restarted when they die, counted faults and fault loops, the ledger's runs and
// their overlaps, the locks and claims left behind, and closing it all.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import type pg from 'pg';
import { spawnFixture, type Fixture } from '../../support/fixtures.js';
import { databaseUrl } from '../../support/postgres.js';
import type { PrivateRedis } from '../../support/private-redis.js';

/** One run of the handler, from the ledger. */
export interface LedgerRun {
  id: string;
  key: string;
  jobId: string;
  worker: string;
  takeover: boolean;
  startedAt: number;
  endedAt: number | undefined;
  outcome: string | undefined;
}

/** A ledger row as PostgreSQL returns it. */
interface LedgerRow {
  id: string;
  key: string;
  job_id: string;
  worker: string;
  takeover: boolean;
  started_at: Date;
  ended_at: Date | null;
  outcome: string | null;
}

/** A worker process and what happened to it. */
export interface ChaosWorker {
  label: string;
  fixture: Fixture;
  ready: boolean;
  /** SIGTERM sent (a graceful stop the scenario asked for). */
  terminated?: boolean;
  /** Set when it exited: the time (ms) and how. */
  exit?: { at: number; code: number | null; signal: NodeJS.Signals | null; stderr: string };
}

/** The tables every run has (a run may have more). */
export interface ChaosTables {
  ledger: string;
  effects: string;
  events: string;
  idem: string;
}

/** A fault loop: stops once asked to and at least `atLeast` faults were injected. */
interface FaultLoop {
  stopping: boolean;
  injected: number;
  atLeast: number;
  done: Promise<void>;
}

/** A random integer in [min, max]. */
export function between(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/** Resolves after `ms`, or as soon as `done()` says so. */
async function pause(ms: number, done: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!done() && Date.now() < until) await sleep(Math.min(50, until - Date.now()));
}

/** A queue's jobs not finished yet, by state. */
export function unfinished(queue: Queue): Promise<Record<string, number>> {
  return queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
}

export abstract class ChaosBase {
  abstract readonly prefix: string;
  abstract readonly tables: ChaosTables;
  readonly workers: ChaosWorker[] = [];
  readonly producers: Fixture[] = [];
  readonly faults: Record<string, number> = {};
  readonly started = Date.now();
  protected restarts = 0;
  private generation = 0;
  private readonly loops: FaultLoop[] = [];

  protected constructor(
    readonly redis: PrivateRedis,
    readonly pool: pg.Pool,
    private restarting: boolean,
  ) {}

  /** Connection options of the scenario's Redis, for clients of the test process. */
  redisOptions(): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.redis.port };
  }

  /** Env every fixture of this run gets: its private Redis (never a cluster), the database, the prefix. */
  protected baseEnv(): Record<string, string> {
    return {
      REDIS_URL: this.redis.url,
      REDIS_CLUSTER_NODES: '',
      DATABASE_URL: databaseUrl(),
      PREFIX: this.prefix,
    };
  }

  /** Counts one injected fault. */
  fault(kind: string, n = 1): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + n;
  }

  // ───────────────────────────── workers ─────────────────────────────

  /**
   * Starts a worker process of `fixtureName` (`env` over the base env and its label); resolves once it is ready. When
   * it exits, `restart` starts the next one unless {@link stopRestarting} was called.
   */
  protected async launchWorker(
    fixtureName: string,
    env: Record<string, string>,
    restart: () => Promise<unknown>,
  ): Promise<ChaosWorker> {
    const label = `w${this.generation++}`;
    const fixture = spawnFixture(fixtureName, { ...this.baseEnv(), LABEL: label, ...env });
    const worker: ChaosWorker = { label, fixture, ready: false };
    this.workers.push(worker);
    void fixture.exited.then((exit) => {
      worker.exit = { at: Date.now(), ...exit };
      if (!this.restarting) return;
      this.restarts++;
      void restart().catch(() => undefined);
    });
    await fixture.waitFor((m) => m.ready === true);
    worker.ready = true;
    return worker;
  }

  /** Workers that are ready, have not exited and were not sent SIGTERM. */
  liveWorkers(): ChaosWorker[] {
    return this.workers.filter((worker) => worker.ready && !worker.exit && !worker.terminated);
  }

  /** Waits until `n` workers are live (restarts take a few seconds). */
  async waitForLiveWorkers(n: number, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.liveWorkers().length < n) {
      if (Date.now() > deadline) throw new Error(`only ${this.liveWorkers().length} of ${n} workers are live`);
      await sleep(50);
    }
  }

  /** No more restarts from now on. */
  stopRestarting(): void {
    this.restarting = false;
  }

  // ───────────────────────────── fault loops ─────────────────────────────

  /**
   * Runs `inject` every `[min, max]` ms (random) until {@link stopFaults}, and at least `atLeast` times (so a fast run
   * still gets its faults; `inject` resolves `false` when it found nothing to break and did not count), at most `max`
   * times. An injection that throws stops its loop; the error is thrown by {@link stopFaults}.
   */
  every(minMs: number, maxMs: number, inject: () => Promise<boolean | void>, atLeast = 0, max = Infinity): void {
    const loop: FaultLoop = { stopping: false, injected: 0, atLeast, done: Promise.resolve() };
    const finished = () => (loop.stopping && loop.injected >= loop.atLeast) || loop.injected >= max;
    const run = async () => {
      for (;;) {
        await pause(between(minMs, maxMs), finished);
        if (finished()) return;
        if ((await inject()) !== false) loop.injected++;
      }
    };
    loop.done = run();
    loop.done.catch(() => undefined); // reported by stopFaults
    this.loops.push(loop);
  }

  /**
   * Stops every fault loop once it injected its minimum, and waits for the injection in progress. With `graceMs`, a
   * loop that could not reach its minimum by then (nothing left to break) is stopped all the same.
   */
  async stopFaults(graceMs?: number): Promise<void> {
    for (const loop of this.loops) loop.stopping = true;
    const loops = this.loops.splice(0);
    const timer =
      graceMs === undefined
        ? undefined
        : setTimeout(() => {
            for (const loop of loops) loop.atLeast = 0;
          }, graceMs);
    try {
      await Promise.all(loops.map((loop) => loop.done));
    } finally {
      clearTimeout(timer);
    }
  }

  // ───────────────────────────── quiescence and invariants ─────────────────────────────

  /** Polls `busy` every `pollMs` until it resolves nothing; throws, naming `what` and its last answer, after `timeoutMs`. */
  protected async waitUntilIdle(
    what: string,
    timeoutMs: number,
    pollMs: number,
    busy: () => Promise<object | undefined>,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await busy();
      if (state === undefined) return;
      if (Date.now() > deadline) throw new Error(`${what} not idle after ${timeoutMs} ms: ${JSON.stringify(state)}`);
      await sleep(pollMs);
    }
  }

  /** The ledger's runs, each with the `extra` columns of its row (the fleet's `lane`). */
  protected async ledgerRuns<Extra extends object = object>(
    extra: (keyof Extra & string)[] = [],
  ): Promise<(LedgerRun & Extra)[]> {
    const columns = ['id::text', 'key', 'job_id', 'worker', 'takeover', 'started_at', 'ended_at', 'outcome', ...extra];
    const { rows } = await this.pool.query<LedgerRow & Extra>(
      `SELECT ${columns.join(', ')} FROM ${this.tables.ledger}`,
    );
    return rows.map(({ id, key, job_id, worker, takeover, started_at, ended_at, outcome, ...rest }) => ({
      id,
      key,
      jobId: job_id,
      worker,
      takeover,
      startedAt: started_at.getTime(),
      endedAt: ended_at?.getTime(),
      outcome: outcome ?? undefined,
      ...(rest as Extra),
    }));
  }

  /** Counts of the events table by type. */
  async eventCounts(): Promise<Record<string, number>> {
    const { rows } = await this.pool.query<{ type: string; n: number }>(
      `SELECT type, count(*)::int AS n FROM ${this.tables.events} GROUP BY type`,
    );
    return Object.fromEntries(rows.map((row) => [row.type, row.n]));
  }

  /**
   * Pairs of runs of one key that overlapped. A run without an end was killed from outside: it ended when its process
   * exited (an upper bound).
   */
  overlaps(runs: LedgerRun[]): { key: string; first: LedgerRun; second: LedgerRun }[] {
    const exitOf = new Map(this.workers.map((worker) => [worker.label, worker.exit?.at]));
    const byKey = new Map<string, LedgerRun[]>();
    for (const run of runs) byKey.set(run.key, [...(byKey.get(run.key) ?? []), run]);
    const found: { key: string; first: LedgerRun; second: LedgerRun }[] = [];
    for (const [key, list] of byKey) {
      list.sort((a, b) => a.startedAt - b.startedAt);
      let open: LedgerRun | undefined;
      let openEnd = -Infinity;
      for (const run of list) {
        if (open && run.startedAt < openEnd) found.push({ key, first: open, second: run });
        const end = run.endedAt ?? exitOf.get(run.worker) ?? Infinity;
        if (end > openEnd) {
          open = run;
          openEnd = end;
        }
      }
    }
    return found;
  }

  /** The locks and claims left (see the subclasses' `heldLocks`). */
  abstract heldLocks(): Promise<string[]>;

  /**
   * Every Redis key under the prefix except completed/failed idempotency records, the registry of guarded queues and
   * keys containing one of `skip`, the BullMQ deduplication keys of `queues`, and with `postgres` the in-progress
   * records of the PostgreSQL store.
   */
  protected async locksAndClaims(skip: string[], queues: string[], postgres: boolean): Promise<string[]> {
    const held: string[] = [];
    for (const key of await this.scan(`${this.prefix}:*`)) {
      if (skip.some((part) => key.includes(part)) || key.endsWith(':{queues}:known')) continue;
      if (key.endsWith(':idempotency')) {
        const state = await this.redis.admin.hget(key, 'state');
        if (state !== 'in_progress') continue;
      }
      held.push(key);
    }
    for (const queue of queues) held.push(...(await this.scan(`bull:${queue}:de:*`)));
    if (postgres) {
      const { rows } = await this.pool.query<{ key: string }>(
        `SELECT key FROM ${this.tables.idem} WHERE state = 'in_progress'`,
      );
      held.push(...rows.map((row) => `postgres:${this.tables.idem}:${row.key}`));
    }
    return held;
  }

  /**
   * The locks and claims held when the queues are idle (`lingering`), and those still held once every lease had ended
   * (`stuck`; `leaseBoundMs`: the longest lease, after which a lock whose release failed is gone by design).
   */
  protected async leftLocks(leaseBoundMs: number, pollMs: number): Promise<{ lingering: string[]; stuck: string[] }> {
    const lingering = await this.heldLocks();
    let stuck = lingering;
    const deadline = Date.now() + leaseBoundMs + 2_000;
    while (stuck.length > 0 && Date.now() < deadline) {
      await sleep(pollMs);
      stuck = await this.heldLocks();
    }
    return { lingering, stuck };
  }

  protected async scan(pattern: string): Promise<string[]> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    return keys.sort();
  }

  // ───────────────────────────── closing ─────────────────────────────

  /** The queues the test process opened (closed by {@link close}). */
  protected abstract openQueues(): Queue[];

  /** Runs once the fault loops stopped, before the processes are killed. */
  protected beforeKill(): void {}

  /** Kills every process, closes clients, drops the tables and stops the Redis server. */
  async close(): Promise<void> {
    this.stopRestarting();
    for (const loop of this.loops) loop.atLeast = 0;
    await this.stopFaults().catch(() => undefined);
    this.beforeKill();
    for (const worker of this.workers) if (!worker.exit) worker.fixture.child.kill('SIGKILL');
    for (const producer of this.producers) producer.child.kill('SIGKILL');
    await Promise.all([...this.workers.map((w) => w.fixture.exited), ...this.producers.map((p) => p.exited)]);
    for (const queue of this.openQueues()) await queue.close().catch(() => undefined);
    for (const table of Object.values(this.tables)) await this.pool.query(`DROP TABLE IF EXISTS ${table}`);
    await this.pool.end();
    await this.redis.stop();
  }
}
