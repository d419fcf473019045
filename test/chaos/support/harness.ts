// The fault-injection harness: a private Redis, a PostgreSQL ledger, worker processes that are restarted when they die,
// producer processes, quiescence, the end-of-run invariants and the figures of each scenario. What it shares with the
// fleet scenario's world (./fleet.ts) is in ./chaos-base.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Queue, type Job } from 'bullmq';
import type pg from 'pg';
import type { ChaosProducerSummary } from '../../fixtures/chaos-producer.js';
import { spawnFixture } from '../../support/fixtures.js';
import { pgPool, uniqueTable } from '../../support/postgres.js';
import { uniqueName } from '../../support/redis.js';
import { PrivateRedis, type PrivateRedisOptions } from '../../support/private-redis.js';
import { ChaosBase, unfinished, type ChaosWorker, type LedgerRun } from './chaos-base.js';

export { between, type ChaosWorker, type LedgerRun } from './chaos-base.js';

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

/** Where each scenario writes its figures; the run's end merges them into .build/chaos-report.json. */
const REPORT_PARTS = new URL('../../../.build/chaos-report.d/', import.meta.url);

/** Event keys `<label>_000` … */
export function eventKeys(label: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${label}_${String(i).padStart(3, '0')}`);
}

/**
 * One scenario's world: its own Redis server, queue, key prefix and PostgreSQL tables, its worker and producer
 * processes, and the faults injected so far.
 */
export class ChaosRun extends ChaosBase {
  readonly queueName = uniqueName('chaos');
  readonly prefix = uniqueName('ujchaos');
  readonly tables = {
    ledger: uniqueTable('chaos_ledger'),
    effects: uniqueTable('chaos_effects'),
    events: uniqueTable('chaos_events'),
    idem: uniqueTable('chaos_idem'),
  };
  readonly producerSummaries: ChaosProducerSummary[] = [];
  queue!: Queue;

  private constructor(
    readonly options: ChaosRunOptions,
    redis: PrivateRedis,
    pool: pg.Pool,
  ) {
    super(redis, pool, options.restart ?? true);
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

  /** Env every fixture of this run gets: the base env, the queue and the lock. */
  protected override baseEnv(): Record<string, string> {
    return { ...super.baseEnv(), QUEUE: this.queueName, LOCK: this.options.lock };
  }

  // ───────────────────────────── workers ─────────────────────────────

  /** Starts a worker (`env` over the run's worker env); resolves once it is ready. */
  async startWorker(env: Record<string, string> = {}): Promise<ChaosWorker> {
    return this.launchWorker(
      'chaos-worker',
      {
        IDEM: this.options.idem,
        IDEM_TABLE: this.tables.idem,
        LEDGER: this.tables.ledger,
        EFFECTS: this.tables.effects,
        EVENTS: this.tables.events,
        ...this.options.workerEnv,
        ...env,
      },
      () => this.startWorker(env),
    );
  }

  /** Starts `n` workers at once. */
  async startWorkers(n: number, env: Record<string, string> = {}): Promise<ChaosWorker[]> {
    return Promise.all(Array.from({ length: n }, () => this.startWorker(env)));
  }

  // ───────────────────────────── producers ─────────────────────────────

  /**
   * Starts `n` producers (each enqueues every key `rounds` times in its own random order), waits until every one is
   * ready, calls `onReady` (where a scenario starts faults that a producer's boot must not meet), then lets them go at
   * once. Resolves when all have printed their summary.
   */
  async produce(
    n: number,
    keys: string[],
    env: Record<string, string>,
    onReady?: () => void,
  ): Promise<ChaosProducerSummary[]> {
    const fixtures = Array.from({ length: n }, (_, i) =>
      spawnFixture('chaos-producer', { ...this.baseEnv(), LABEL: `p${i}`, KEYS: keys.join(','), ...env }),
    );
    this.producers.push(...fixtures);
    await Promise.all(fixtures.map((fixture) => fixture.waitFor((m) => m.ready === true)));
    onReady?.();
    for (const fixture of fixtures) fixture.child.stdin.write('go\n');
    const summaries = await Promise.all(
      fixtures.map(async (fixture) => (await fixture.waitFor((m) => 'summary' in m)).summary as ChaosProducerSummary),
    );
    this.producerSummaries.push(...summaries);
    return summaries;
  }

  // ───────────────────────────── quiescence and invariants ─────────────────────────────

  /**
   * Waits until the queue is idle: nothing waiting, active, delayed or prioritized (a job of a killed worker stays
   * active until BullMQ's stall check gives it back, so this includes every recovery). Polls: no single event says
   * that a whole queue fed by several processes is done.
   */
  async quiesce(timeoutMs: number): Promise<void> {
    await this.waitUntilIdle('queue', timeoutMs, 200, async () => {
      const counts = await unfinished(this.queue);
      return Object.values(counts).every((n) => n === 0) ? undefined : counts;
    });
  }

  runs(): Promise<LedgerRun[]> {
    return this.ledgerRuns();
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

  /**
   * The locks and claims left: every Redis key under the prefix except completed/failed idempotency records and the
   * dead set, BullMQ deduplication keys of the queue, and in-progress records of the PostgreSQL store.
   */
  heldLocks(): Promise<string[]> {
    return this.locksAndClaims([':{dead}:'], [this.queueName], this.options.idem === 'postgres');
  }

  /** Entries of the library's dead set (rejected duplicates: a job that never ran). */
  async deadSetSize(): Promise<number> {
    return this.redis.admin.zcard(`${this.prefix}:{dead}:index`);
  }

  /**
   * The end-of-run invariants, after quiescence: for each event of `keys`, exactly one effect (`effectOnce`); every job
   * completed; no overlap of runs of one key (`exclusive`); no lock or claim held once every lease had ended
   * (`leaseBoundMs`: the longest lease, after which a lock whose release failed is gone by design).
   */
  async figures(keys: string[], leaseBoundMs: number, notes?: Record<string, unknown>): Promise<ChaosFigures> {
    const { lingering, stuck } = await this.leftLocks(leaseBoundMs, 200);
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

  protected openQueues(): Queue[] {
    return this.queue ? [this.queue] : [];
  }
}

/** Prints a scenario's figures on one line and adds them to .build/chaos-report.json (at the run's end). */
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
  // A file per scenario: scenarios run in two jest workers at once, and the run's global teardown merges them into
  // .build/chaos-report.json (test/chaos/global-teardown.ts).
  mkdirSync(REPORT_PARTS, { recursive: true });
  writeFileSync(
    new URL(`${figures.scenario}.json`, REPORT_PARTS),
    `${JSON.stringify({ ...figures, line }, null, 2)}\n`,
  );
}
