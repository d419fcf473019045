// The fault-injection harness: a private Redis, a PostgreSQL ledger, worker processes that are restarted when they die,
// producer processes, quiescence, the end-of-run invariants and the figures of each scenario.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, type Job } from 'bullmq';
import type pg from 'pg';
import type { ChaosProducerSummary } from '../../fixtures/chaos-producer.js';
import { spawnFixture, type Fixture } from '../../support/fixtures.js';
import { databaseUrl, pgPool, uniqueTable } from '../../support/postgres.js';
import { uniqueName } from '../../support/redis.js';
import { PrivateRedis, type PrivateRedisOptions } from '../../support/private-redis.js';

/** Lock of the chaos processor (`none`: no `@UniqueJob`). */
export type ChaosLock = 'none' | 'while_executing' | 'until_executed' | 'until_and_while_executing';
/** Idempotency of the chaos processor: none, the Redis store (plain mode), the PostgreSQL store (transactional). */
export type ChaosIdempotency = 'none' | 'redis' | 'postgres';

export interface ChaosRunOptions extends PrivateRedisOptions {
  /** Report key and label of the scenario. */
  scenario: string;
  lock: ChaosLock;
  idem: ChaosIdempotency;
  /** Env of every worker (CONCURRENCY, WORK_MS, CRASH_PLAN, leases, BullMQ stall settings, …). */
  workerEnv?: Record<string, string>;
  /** Start a new worker whenever one exits, until `stopRestarting()`. Default true. */
  restart?: boolean;
}

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

/** A library event, error log line or BullMQ worker error, as a worker recorded it. */
export interface LedgerEvent {
  worker: string;
  type: string;
  jobId: string | null;
  key: string | null;
  detail: unknown;
}

/** What a scenario proves, as figures (written to .build/chaos-report.json and printed on one line). */
export interface ChaosFigures {
  scenario: string;
  /** Processes started: workers (restarts included) and producers. */
  processes: { workers: number; producers: number; restarts: number };
  /** Distinct events (each must have exactly one effect). */
  events: number;
  /** Calls to enqueue made by producers (retries included). */
  enqueueCalls: number;
  /** Jobs in the queue at the end. */
  jobs: number;
  /** Times BullMQ handed a job to a worker (the jobs' `attemptsStarted`: retries, reschedules, stall recoveries). */
  deliveries: number;
  /** Times the handler started (ledger rows). */
  handlerRuns: number;
  /** Committed effects. */
  effects: number;
  /** Faults injected, by kind. */
  faults: Record<string, number>;
  /** Effects beyond the first of an event. */
  duplicates: number;
  /** Events without an effect, plus jobs that did not complete. */
  lost: number;
  /** Pairs of runs of one digest that overlapped in time. */
  overlaps: number;
  /** Lock keys (the library's and BullMQ's deduplication keys) and in-progress claims left when the queue was idle. */
  lingeringLocks: number;
  /** Of those, still there once every lease had ended. */
  stuckLocks: number;
  durationMs: number;
  /** Anything the scenario wants on record (detections, expected outcomes). */
  notes?: Record<string, unknown>;
}

/** Where the figures of every scenario of a run are written. */
export const REPORT_FILE = new URL('../../../.build/chaos-report.json', import.meta.url);

/** Resolves after `ms`, or as soon as `done()` says so. */
async function pause(ms: number, done: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!done() && Date.now() < until) await sleep(Math.min(50, until - Date.now()));
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

/** Event keys `<label>_000` … */
export function eventKeys(label: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${label}_${String(i).padStart(3, '0')}`);
}

/** A worker process and what happened to it. */
export interface ChaosWorker {
  label: string;
  fixture: Fixture;
  ready: boolean;
  /** Set when it exited: the time (ms) and how. */
  exit?: { at: number; code: number | null; signal: NodeJS.Signals | null; stderr: string };
}

/**
 * One scenario's world: its own Redis server, queue, key prefix and PostgreSQL tables, its worker and producer
 * processes, and the faults injected so far.
 */
export class ChaosRun {
  readonly queueName = uniqueName('chaos');
  readonly prefix = uniqueName('ujchaos');
  readonly tables = {
    ledger: uniqueTable('chaos_ledger'),
    effects: uniqueTable('chaos_effects'),
    events: uniqueTable('chaos_events'),
    idem: uniqueTable('chaos_idem'),
  };
  readonly workers: ChaosWorker[] = [];
  readonly producers: Fixture[] = [];
  readonly producerSummaries: ChaosProducerSummary[] = [];
  readonly faults: Record<string, number> = {};
  readonly started = Date.now();
  queue!: Queue;
  private restarting: boolean;
  private restarts = 0;
  private generation = 0;
  private readonly loops: FaultLoop[] = [];

  private constructor(
    readonly options: ChaosRunOptions,
    readonly redis: PrivateRedis,
    readonly pool: pg.Pool,
  ) {
    this.restarting = options.restart ?? true;
  }

  static async create(options: ChaosRunOptions): Promise<ChaosRun> {
    const redis = await PrivateRedis.start(options);
    const run = new ChaosRun(options, redis, pgPool(4));
    const { ledger, effects, events, idem } = run.tables;
    // No unique index anywhere: a second run or a second effect of one event is a second row.
    await run.pool.query(
      `CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, key text NOT NULL, job_id text NOT NULL, worker text NOT NULL,
        takeover boolean NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz,
        outcome text)`,
    );
    await run.pool.query(
      `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, key text NOT NULL, job_id text NOT NULL,
        worker text NOT NULL, run_id bigint NOT NULL)`,
    );
    await run.pool.query(
      `CREATE TABLE ${events} (id bigserial PRIMARY KEY, worker text NOT NULL, type text NOT NULL, job_id text,
        key text, detail jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    if (options.idem === 'postgres') {
      const { PostgresIdempotencyStore } =
        await import('../../../lib/idempotency/stores/postgres-idempotency.store.js');
      await new PostgresIdempotencyStore({ pool: run.pool, table: idem }).migrate();
    }
    run.queue = new Queue(run.queueName, { connection: { ...run.redisOptions(), maxRetriesPerRequest: null } });
    run.queue.on('error', () => undefined); // killed connections reconnect
    await run.queue.waitUntilReady();
    return run;
  }

  /** Connection options of the scenario's Redis, for clients of the test process. */
  redisOptions(): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.redis.port };
  }

  /** Env every fixture of this run gets: its private Redis (never a cluster), the database, names and tables. */
  private baseEnv(): Record<string, string> {
    return {
      REDIS_URL: this.redis.url,
      REDIS_CLUSTER_NODES: '',
      DATABASE_URL: databaseUrl(),
      QUEUE: this.queueName,
      PREFIX: this.prefix,
      LOCK: this.options.lock,
    };
  }

  /** Counts one injected fault. */
  fault(kind: string, n = 1): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + n;
  }

  // ───────────────────────────── workers ─────────────────────────────

  /** Starts a worker (`env` over the run's worker env); resolves once it is ready. */
  async startWorker(env: Record<string, string> = {}): Promise<ChaosWorker> {
    const label = `w${this.generation++}`;
    const fixture = spawnFixture('chaos-worker', {
      ...this.baseEnv(),
      LABEL: label,
      IDEM: this.options.idem,
      IDEM_TABLE: this.tables.idem,
      LEDGER: this.tables.ledger,
      EFFECTS: this.tables.effects,
      EVENTS: this.tables.events,
      ...this.options.workerEnv,
      ...env,
    });
    const worker: ChaosWorker = { label, fixture, ready: false };
    this.workers.push(worker);
    void fixture.exited.then((exit) => {
      worker.exit = { at: Date.now(), ...exit };
      if (!this.restarting) return;
      this.restarts++;
      void this.startWorker(env).catch(() => undefined);
    });
    await fixture.waitFor((m) => m.ready === true);
    worker.ready = true;
    return worker;
  }

  /** Starts `n` workers at once. */
  async startWorkers(n: number, env: Record<string, string> = {}): Promise<ChaosWorker[]> {
    return Promise.all(Array.from({ length: n }, () => this.startWorker(env)));
  }

  /** Workers that are ready and have not exited. */
  liveWorkers(): ChaosWorker[] {
    return this.workers.filter((worker) => worker.ready && !worker.exit);
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

  // ───────────────────────────── producers ─────────────────────────────

  /**
   * Starts `n` producers (each enqueues every key `rounds` times in its own random order), waits until every one is
   * ready, then lets them go at once. Resolves when all have printed their summary.
   */
  async produce(n: number, keys: string[], env: Record<string, string>): Promise<ChaosProducerSummary[]> {
    const fixtures = Array.from({ length: n }, (_, i) =>
      spawnFixture('chaos-producer', { ...this.baseEnv(), LABEL: `p${i}`, KEYS: keys.join(','), ...env }),
    );
    this.producers.push(...fixtures);
    await Promise.all(fixtures.map((fixture) => fixture.waitFor((m) => m.ready === true)));
    for (const fixture of fixtures) fixture.child.stdin.write('go\n');
    const summaries = await Promise.all(
      fixtures.map(async (fixture) => (await fixture.waitFor((m) => 'summary' in m)).summary as ChaosProducerSummary),
    );
    this.producerSummaries.push(...summaries);
    return summaries;
  }

  // ───────────────────────────── fault loops ─────────────────────────────

  /**
   * Runs `inject` every `[min, max]` ms (random) until {@link stopFaults}, and at least `atLeast` times (so a fast run
   * still gets its faults; `inject` resolves `false` when it found nothing to break and did not count). An injection
   * that throws stops its loop; the error is thrown by {@link stopFaults}.
   */
  every(minMs: number, maxMs: number, inject: () => Promise<boolean | void>, atLeast = 0): void {
    const loop: FaultLoop = { stopping: false, injected: 0, atLeast, done: Promise.resolve() };
    const finished = () => loop.stopping && loop.injected >= loop.atLeast;
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

  /** Stops every fault loop once it injected its minimum, and waits for the injection in progress. */
  async stopFaults(): Promise<void> {
    for (const loop of this.loops) loop.stopping = true;
    await Promise.all(this.loops.splice(0).map((loop) => loop.done));
  }

  // ───────────────────────────── quiescence and invariants ─────────────────────────────

  /**
   * Waits until the queue is idle: nothing waiting, active, delayed or prioritized (a job of a killed worker stays
   * active until BullMQ's stall check gives it back, so this includes every recovery). Polls: no single event says
   * that a whole queue fed by several processes is done.
   */
  async quiesce(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const counts = await this.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
      if (Object.values(counts).every((n) => n === 0)) return;
      if (Date.now() > deadline) throw new Error(`queue not idle after ${timeoutMs} ms: ${JSON.stringify(counts)}`);
      await sleep(200);
    }
  }

  async runs(): Promise<LedgerRun[]> {
    const { rows } = await this.pool.query<{
      id: string;
      key: string;
      job_id: string;
      worker: string;
      takeover: boolean;
      started_at: Date;
      ended_at: Date | null;
      outcome: string | null;
    }>(`SELECT id::text, key, job_id, worker, takeover, started_at, ended_at, outcome FROM ${this.tables.ledger}`);
    return rows.map((row) => ({
      id: row.id,
      key: row.key,
      jobId: row.job_id,
      worker: row.worker,
      takeover: row.takeover,
      startedAt: row.started_at.getTime(),
      endedAt: row.ended_at?.getTime(),
      outcome: row.outcome ?? undefined,
    }));
  }

  async effectsPerKey(): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ key: string; n: number }>(
      `SELECT key, count(*)::int AS n FROM ${this.tables.effects} GROUP BY key`,
    );
    return new Map(rows.map((row) => [row.key, row.n]));
  }

  async events(types?: string[]): Promise<LedgerEvent[]> {
    const { rows } = await this.pool.query<{
      worker: string;
      type: string;
      job_id: string | null;
      key: string | null;
      detail: unknown;
    }>(
      `SELECT worker, type, job_id, key, detail FROM ${this.tables.events}
        ${types ? 'WHERE type = ANY($1)' : ''} ORDER BY id`,
      types ? [types] : [],
    );
    return rows.map(({ worker, type, job_id, key, detail }) => ({ worker, type, jobId: job_id, key, detail }));
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

  /**
   * The locks and claims left: every Redis key under the prefix except completed/failed idempotency records and the
   * dead set, BullMQ deduplication keys of the queue, and in-progress records of the PostgreSQL store.
   */
  async heldLocks(): Promise<string[]> {
    const held: string[] = [];
    for (const key of await this.scan(`${this.prefix}:*`)) {
      if (key.includes(':{dead}:')) continue;
      if (key.endsWith(':idempotency')) {
        const state = await this.redis.admin.hget(key, 'state');
        if (state !== 'in_progress') continue;
      }
      held.push(key);
    }
    held.push(...(await this.scan(`bull:${this.queueName}:de:*`)));
    if (this.options.idem === 'postgres') {
      const { rows } = await this.pool.query<{ key: string }>(
        `SELECT key FROM ${this.tables.idem} WHERE state = 'in_progress'`,
      );
      held.push(...rows.map((row) => `postgres:${this.tables.idem}:${row.key}`));
    }
    return held;
  }

  /** Entries of the library's dead set (rejected duplicates: a job that never ran). */
  async deadSetSize(): Promise<number> {
    return this.redis.admin.zcard(`${this.prefix}:{dead}:index`);
  }

  private async scan(pattern: string): Promise<string[]> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    return keys.sort();
  }

  /**
   * The end-of-run invariants, after quiescence: for each event of `keys`, exactly one effect (`effectOnce`); every job
   * completed; no overlap of runs of one key (`exclusive`); no lock or claim held once every lease had ended
   * (`leaseBoundMs`: the longest lease, after which a lock whose release failed is gone by design).
   */
  async figures(keys: string[], leaseBoundMs: number, notes?: Record<string, unknown>): Promise<ChaosFigures> {
    const lingering = await this.heldLocks();
    let stuck = lingering;
    const deadline = Date.now() + leaseBoundMs + 2_000;
    while (stuck.length > 0 && Date.now() < deadline) {
      await sleep(200);
      stuck = await this.heldLocks();
    }
    const effects = await this.effectsPerKey();
    const runs = await this.runs();
    const completed = await this.queue.getJobs(['completed'], 0, -1);
    const failed = await this.queue.getJobs(['failed'], 0, -1);
    const completedIds = new Set(completed.map((job) => job.id));
    const enqueued = this.producerSummaries.flatMap((summary) => summary.enqueued);
    const notCompleted = enqueued.filter(({ jobId }) => !completedIds.has(jobId));
    const missing = keys.filter((key) => !effects.has(key));
    const failedIds = new Set(failed.map((job) => job.id));
    return {
      scenario: this.options.scenario,
      processes: { workers: this.workers.length, producers: this.producers.length, restarts: this.restarts },
      events: keys.length,
      enqueueCalls: this.producerSummaries.reduce((n, summary) => n + summary.calls, 0),
      jobs: completed.length + failed.length,
      deliveries: [...completed, ...failed].reduce((n, job) => n + job.attemptsStarted, 0),
      handlerRuns: runs.length,
      effects: [...effects.values()].reduce((a, b) => a + b, 0),
      faults: { ...this.faults },
      duplicates: [...effects.values()].reduce((n, count) => n + Math.max(0, count - 1), 0),
      lost: missing.length + failed.length + notCompleted.filter(({ jobId }) => !failedIds.has(jobId)).length,
      overlaps: this.overlaps(runs).length,
      lingeringLocks: lingering.length,
      stuckLocks: stuck.length,
      durationMs: Date.now() - this.started,
      ...(notes ? { notes } : {}),
    };
  }

  /** Failed jobs with their reasons (for a failing assertion's message). */
  async failedJobs(): Promise<Pick<Job, 'id' | 'failedReason'>[]> {
    return (await this.queue.getJobs(['failed'], 0, -1)).map(({ id, failedReason }) => ({ id, failedReason }));
  }

  /** Kills every process, closes clients, drops the tables and stops the Redis server. */
  async close(): Promise<void> {
    this.stopRestarting();
    for (const loop of this.loops) loop.atLeast = 0;
    await this.stopFaults().catch(() => undefined);
    for (const worker of this.workers) if (!worker.exit) worker.fixture.child.kill('SIGKILL');
    for (const producer of this.producers) producer.child.kill('SIGKILL');
    await Promise.all([...this.workers.map((w) => w.fixture.exited), ...this.producers.map((p) => p.exited)]);
    await this.queue?.close().catch(() => undefined);
    for (const table of Object.values(this.tables)) await this.pool.query(`DROP TABLE IF EXISTS ${table}`);
    await this.pool.end();
    await this.redis.stop();
  }
}

/** Prints a scenario's figures on one line and adds them to .build/chaos-report.json. */
export function report(figures: ChaosFigures): void {
  const faults = Object.entries(figures.faults)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ');
  const { workers, producers, restarts } = figures.processes;
  const line =
    `chaos ${figures.scenario}: ${workers + producers} processes (${workers} workers incl. ${restarts} restarts, ` +
    `${producers} producers), ${figures.events} events, ${figures.enqueueCalls} enqueue calls, ${figures.jobs} jobs, ` +
    `${figures.deliveries} deliveries, ${figures.handlerRuns} handler runs, ${figures.effects} effects; ` +
    `faults: ${faults || 'none'}; duplicates ${figures.duplicates}, lost ${figures.lost}, overlaps ${figures.overlaps}, ` +
    `stuck locks ${figures.stuckLocks} (${figures.lingeringLocks} lingering until their lease ended); ` +
    `${(figures.durationMs / 1000).toFixed(1)} s`;
  process.stdout.write(`\n${line}\n`);
  mkdirSync(new URL('.', REPORT_FILE), { recursive: true });
  const existing = existsSync(REPORT_FILE)
    ? (JSON.parse(readFileSync(REPORT_FILE, 'utf8')) as { scenarios: Record<string, unknown> })
    : { scenarios: {} };
  existing.scenarios[figures.scenario] = { ...figures, line };
  writeFileSync(REPORT_FILE, `${JSON.stringify({ ...existing, updatedAt: new Date().toISOString() }, null, 2)}\n`);
}
