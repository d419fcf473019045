// The fleet scenario's world (test/chaos/fleet.chaos.ts): a private Redis (AOF), PostgreSQL tables, lanes (a queue
// each, see test/fixtures/chaos-fleet.ts), worker processes that serve every lane and are restarted when they die,
// producer processes that are restarted from their progress when they are killed, fault loops, quiescence, and the
// end-of-run invariants, lane by lane.
import { appendFileSync, mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, type Job } from 'bullmq';
import type pg from 'pg';
import { laneKeys, lockForbidsOverlap, type FleetLane } from '../../fixtures/chaos-fleet.js';
import type { FleetProgress } from '../../fixtures/chaos-fleet-producer.js';
import { spawnFixture, type Fixture } from '../../support/fixtures.js';
import { databaseUrl, pgPool, uniqueTable } from '../../support/postgres.js';
import { PrivateRedis } from '../../support/private-redis.js';
import { uniqueName } from '../../support/redis.js';
import { between, type ChaosFigures, type LedgerRun } from './harness.js';

/** A lane as the test declares it (the queue name is the run's). */
export type FleetLaneSpec = Omit<FleetLane, 'queue'>;

export interface FleetOptions {
  scenario: string;
  lanes: FleetLaneSpec[];
  workers: number;
  producers: number;
  /** Env of every worker (CONCURRENCY, WORK_MS, CRASH_PLAN, leases, …). */
  workerEnv?: Record<string, string>;
  /** Env of every producer (IN_FLIGHT, …). */
  producerEnv?: Record<string, string>;
  /** Seed of the producers' plan (printed with the figures: a failing run can be replayed with its plan). */
  seed: number;
}

/** A worker process and what happened to it. */
export interface FleetWorker {
  label: string;
  fixture: Fixture;
  ready: boolean;
  /** SIGTERM sent (a graceful stop the scenario asked for). */
  terminated?: boolean;
  exit?: { at: number; code: number | null; signal: NodeJS.Signals | null; stderr: string };
}

/** A producer slot: its share of the plan, the process sending it now, and how far it got. */
interface ProducerSlot {
  index: number;
  done: number;
  total: number;
  finished: boolean;
  current?: Fixture;
  /** The current process has reported progress: it is sending. */
  sending: boolean;
  starts: number;
}

/** The figures of one lane. */
export interface LaneFigures {
  lane: string;
  lock: string;
  client: string;
  idem: string;
  copies: number;
  events: number;
  jobs: number;
  deliveries: number;
  handlerRuns: number;
  effects: number;
  /** Plain lanes: provider calls beyond the first of a downstream key (re-runs after a crash, absorbed by the key). */
  repeatedProviderCalls: number;
  /** Duplicates refused at enqueue into the dead set (`client: 'reject'`). */
  refused: number;
  takeovers: number;
  duplicates: number;
  lost: number;
  overlaps: number;
  /** Whether the lane's lock forbids overlapping runs (only then is `overlaps` an invariant). */
  overlapForbidden: boolean;
}

/** A fault loop: stops once asked to and at least `atLeast` faults were injected (`max`: never more). */
interface FaultLoop {
  stopping: boolean;
  injected: number;
  atLeast: number;
  done: Promise<void>;
}

/** Where the whole stderr of a worker that died by itself is written (the test's message has its end). */
const CRASH_LOG = new URL('../../../.build/chaos-fleet-crashes.log', import.meta.url);
mkdirSync(new URL('.', CRASH_LOG), { recursive: true });

export class FleetRun {
  readonly id = uniqueName('fleet');
  readonly prefix = uniqueName('ujfleet');
  readonly lanes: FleetLane[];
  readonly tables = {
    ledger: uniqueTable('fleet_ledger'),
    effects: uniqueTable('fleet_effects'),
    events: uniqueTable('fleet_events'),
    provider: uniqueTable('fleet_provider'),
    idem: uniqueTable('fleet_idem'),
  };
  /** application_name of the workers' store connections (the targets of pg_terminate_backend) and ledger ones. */
  readonly storeApp: string;
  readonly ledgerApp: string;
  readonly workers: FleetWorker[] = [];
  readonly slots: ProducerSlot[] = [];
  readonly producers: Fixture[] = [];
  readonly faults: Record<string, number> = {};
  readonly notes: Record<string, unknown> = {};
  /** Jobs the producers reported created: job id → lane and key. */
  readonly enqueued = new Map<string, { lane: string; key: string }>();
  readonly producerErrors: Record<string, number> = {};
  readonly gaveUp: string[] = [];
  enqueueCalls = 0;
  duplicateAnswers = 0;
  refusedAnswers = 0;
  readonly started = Date.now();
  queues = new Map<string, Queue>();
  private restarting = true;
  private restarts = 0;
  private generation = 0;
  private readonly loops: FaultLoop[] = [];
  private allProduced!: Promise<void>;
  private producedResolve!: () => void;

  private constructor(
    readonly options: FleetOptions,
    readonly redis: PrivateRedis,
    readonly pool: pg.Pool,
  ) {
    const tag = this.id.replace(/[^a-z0-9]/g, '');
    this.storeApp = `chaos_store_${tag}`;
    this.ledgerApp = `chaos_ledger_${tag}`;
    this.lanes = options.lanes.map((lane) => ({ ...lane, queue: uniqueName(`fleet${lane.name}`) }));
  }

  static async create(options: FleetOptions): Promise<FleetRun> {
    const redis = await PrivateRedis.start({ appendonly: true });
    const run = new FleetRun(options, redis, pgPool(4));
    const { ledger, effects, events, provider, idem } = run.tables;
    // No unique index on the ledger or the effects: a second run or a second effect of one event is a second row.
    await run.pool.query(
      `CREATE TABLE ${ledger} (id bigserial PRIMARY KEY, lane text NOT NULL, key text NOT NULL, job_id text NOT NULL,
        worker text NOT NULL, takeover boolean NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        ended_at timestamptz, outcome text)`,
    );
    await run.pool.query(
      `CREATE TABLE ${effects} (id bigserial PRIMARY KEY, lane text NOT NULL, key text NOT NULL, job_id text NOT NULL,
        worker text NOT NULL, run_id bigint NOT NULL)`,
    );
    await run.pool.query(
      `CREATE TABLE ${events} (id bigserial PRIMARY KEY, worker text NOT NULL, type text NOT NULL, job_id text,
        key text, detail jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    // The "provider" of the plain lanes: it applies a downstream key once, as a payment provider does.
    await run.pool.query(
      `CREATE TABLE ${provider} (downstream_key text PRIMARY KEY, lane text NOT NULL, key text NOT NULL,
        calls integer NOT NULL DEFAULT 1)`,
    );
    const { PostgresIdempotencyStore } = await import('../../../lib/idempotency/stores/postgres-idempotency.store.js');
    await new PostgresIdempotencyStore({ pool: run.pool, table: idem }).migrate();
    for (const lane of run.lanes) {
      const queue = new Queue(lane.queue, { connection: { ...run.redisOptions(), maxRetriesPerRequest: null } });
      queue.on('error', () => undefined); // killed connections reconnect
      await queue.waitUntilReady();
      run.queues.set(lane.name, queue);
    }
    run.allProduced = new Promise((resolve) => (run.producedResolve = resolve));
    return run;
  }

  redisOptions(): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.redis.port };
  }

  private baseEnv(): Record<string, string> {
    return {
      REDIS_URL: this.redis.url,
      REDIS_CLUSTER_NODES: '',
      DATABASE_URL: databaseUrl(),
      PREFIX: this.prefix,
      LANES: JSON.stringify(this.lanes),
    };
  }

  fault(kind: string, n = 1): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + n;
  }

  // ───────────────────────────── workers ─────────────────────────────

  async startWorker(): Promise<FleetWorker> {
    const label = `w${this.generation++}`;
    const fixture = spawnFixture('chaos-fleet-worker', {
      ...this.baseEnv(),
      LABEL: label,
      LEDGER: this.tables.ledger,
      EFFECTS: this.tables.effects,
      EVENTS: this.tables.events,
      PROVIDER: this.tables.provider,
      IDEM_TABLE: this.tables.idem,
      STORE_APP: this.storeApp,
      LEDGER_APP: this.ledgerApp,
      ...this.options.workerEnv,
    });
    const worker: FleetWorker = { label, fixture, ready: false };
    this.workers.push(worker);
    void fixture.exited.then((exit) => {
      worker.exit = { at: Date.now(), ...exit };
      if (!this.restarting) return;
      this.restarts++;
      void this.startWorker().catch(() => undefined);
    });
    await fixture.waitFor((m) => m.ready === true);
    worker.ready = true;
    return worker;
  }

  liveWorkers(): FleetWorker[] {
    return this.workers.filter((worker) => worker.ready && !worker.exit && !worker.terminated);
  }

  stopRestarting(): void {
    this.restarting = false;
  }

  // ───────────────────────────── producers ─────────────────────────────

  /** Spawns the process of a slot from its progress; resolves once it is ready. */
  private async spawnProducer(slot: ProducerSlot): Promise<Fixture> {
    const fixture = spawnFixture('chaos-fleet-producer', {
      ...this.baseEnv(),
      LABEL: `p${slot.index}.${slot.starts}`,
      PRODUCERS: String(this.options.producers),
      INDEX: String(slot.index),
      SEED: String(this.options.seed),
      START: String(slot.done),
      ...this.options.producerEnv,
    });
    slot.starts++;
    slot.current = fixture;
    slot.sending = false;
    this.producers.push(fixture);
    createInterface({ input: fixture.child.stdout }).on('line', (line) => {
      if (!line.startsWith('{"progress"')) {
        if (line === '{"finished":true}') slot.finished = true;
        return;
      }
      const { progress } = JSON.parse(line) as { progress: FleetProgress };
      if (slot.current === fixture) slot.sending = true;
      slot.done = Math.max(slot.done, progress.done);
      slot.total = progress.total;
      for (const [lane, key, jobId] of progress.enqueued) this.enqueued.set(`${lane}/${jobId}`, { lane, key });
      this.enqueueCalls += progress.calls;
      this.duplicateAnswers += progress.duplicates;
      this.refusedAnswers += progress.refused;
      for (const [message, n] of Object.entries(progress.errors)) {
        this.producerErrors[message] = (this.producerErrors[message] ?? 0) + n;
      }
      this.gaveUp.push(...progress.gaveUp);
    });
    void fixture.exited.then(() => {
      if (slot.current !== fixture) return;
      slot.current = undefined;
      if (slot.finished) {
        if (this.slots.every((s) => s.finished)) this.producedResolve();
        return;
      }
      // Killed mid-enqueue: a new process sends the rest of the slot's plan, from its last acknowledged op.
      void this.spawnProducer(slot)
        .then((next) => next.child.stdin.write('go\n'))
        .catch(() => undefined);
    });
    await fixture.waitFor((m) => m.ready === true);
    return fixture;
  }

  /** Starts every producer, lets them go at once; {@link produced} resolves once every slot sent its whole share. */
  async startProducers(): Promise<void> {
    for (let index = 0; index < this.options.producers; index++) {
      this.slots.push({ index, done: 0, total: 0, finished: false, sending: false, starts: 0 });
    }
    const fixtures = await Promise.all(this.slots.map((slot) => this.spawnProducer(slot)));
    for (const fixture of fixtures) fixture.child.stdin.write('go\n');
  }

  produced(): Promise<void> {
    return this.allProduced;
  }

  /** Producer processes sending now, whose slot has sent between `from` and `to` (fractions) of its share. */
  liveProducers(from = 0, to = 1): Fixture[] {
    return this.slots
      .filter((slot) => !slot.finished && slot.sending && slot.current && slot.total > 0)
      .filter((slot) => slot.done >= from * slot.total && slot.done < Math.min(to * slot.total, slot.total))
      .map((slot) => slot.current!);
  }

  // ───────────────────────────── fault loops ─────────────────────────────

  /** Runs `inject` every [min, max] ms until {@link stopFaults} (and at least `atLeast` times; at most `max`). */
  every(minMs: number, maxMs: number, inject: () => Promise<boolean | void>, atLeast = 0, max = Infinity): void {
    const loop: FaultLoop = { stopping: false, injected: 0, atLeast, done: Promise.resolve() };
    const finished = () => (loop.stopping && loop.injected >= loop.atLeast) || loop.injected >= max;
    const run = async () => {
      for (;;) {
        const until = Date.now() + between(minMs, maxMs);
        while (!finished() && Date.now() < until) await sleep(Math.min(50, until - Date.now()));
        if (finished()) return;
        if ((await inject()) !== false) loop.injected++;
      }
    };
    loop.done = run();
    loop.done.catch(() => undefined); // reported by stopFaults
    this.loops.push(loop);
  }

  /**
   * Stops every fault loop once it injected its minimum, and waits for the injection in progress. A loop that could not
   * reach its minimum within `graceMs` (nothing left to break) is stopped all the same: the test's fault counts say so.
   */
  async stopFaults(graceMs = 15_000): Promise<void> {
    for (const loop of this.loops) loop.stopping = true;
    const loops = this.loops.splice(0);
    const timer = setTimeout(() => {
      for (const loop of loops) loop.atLeast = 0;
    }, graceMs);
    try {
      await Promise.all(loops.map((loop) => loop.done));
    } finally {
      clearTimeout(timer);
    }
  }

  /** Jobs not finished yet, over every lane: waiting, delayed, prioritized, active. */
  async backlog(): Promise<number> {
    let n = 0;
    for (const queue of this.queues.values()) {
      const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
      n += Object.values(counts).reduce((a, b) => a + b, 0);
    }
    return n;
  }

  /** Prints one progress line to stderr every `everyMs` until the returned function is called. */
  monitor(everyMs = 10_000): () => void {
    const timer = setInterval(() => {
      void this.backlog()
        .then((backlog) => {
          const sent = this.slots.map((slot) => `${slot.done}/${slot.total}`).join(' ');
          const faults = Object.entries(this.faults)
            .map(([kind, n]) => `${kind} ${n}`)
            .join(', ');
          process.stderr.write(
            `fleet ${Math.round((Date.now() - this.started) / 1000)} s: producers ${sent}; backlog ${backlog}; ` +
              `live workers ${this.liveWorkers().length}; faults: ${faults}\n`,
          );
        })
        .catch(() => undefined);
    }, everyMs);
    return () => clearInterval(timer);
  }

  // ───────────────────────────── quiescence and invariants ─────────────────────────────

  /** Waits until every lane's queue is idle (nothing waiting, active, delayed, prioritized). */
  async quiesce(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let busy: Record<string, Record<string, number>> = {};
      for (const [name, queue] of this.queues) {
        const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
        if (Object.values(counts).some((n) => n > 0)) busy = { ...busy, [name]: counts };
      }
      if (Object.keys(busy).length === 0) return;
      if (Date.now() > deadline) throw new Error(`queues not idle after ${timeoutMs} ms: ${JSON.stringify(busy)}`);
      await sleep(500);
    }
  }

  async runs(): Promise<(LedgerRun & { lane: string })[]> {
    const { rows } = await this.pool.query<{
      id: string;
      lane: string;
      key: string;
      job_id: string;
      worker: string;
      takeover: boolean;
      started_at: Date;
      ended_at: Date | null;
      outcome: string | null;
    }>(
      `SELECT id::text, lane, key, job_id, worker, takeover, started_at, ended_at, outcome FROM ${this.tables.ledger}`,
    );
    return rows.map((row) => ({
      id: row.id,
      lane: row.lane,
      key: row.key,
      jobId: row.job_id,
      worker: row.worker,
      takeover: row.takeover,
      startedAt: row.started_at.getTime(),
      endedAt: row.ended_at?.getTime(),
      outcome: row.outcome ?? undefined,
    }));
  }

  /** Pairs of runs of one event that overlapped (a run killed from outside ended when its process exited). */
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

  async eventCounts(): Promise<Record<string, number>> {
    const { rows } = await this.pool.query<{ type: string; n: number }>(
      `SELECT type, count(*)::int AS n FROM ${this.tables.events} GROUP BY type`,
    );
    return Object.fromEntries(rows.map((row) => [row.type, row.n]));
  }

  async eventSamples(types: string[], limit = 5): Promise<unknown[]> {
    const { rows } = await this.pool.query<{ worker: string; type: string; job_id: string | null; detail: unknown }>(
      `SELECT worker, type, job_id, detail FROM ${this.tables.events} WHERE type = ANY($1) ORDER BY id LIMIT $2`,
      [types, limit],
    );
    return rows;
  }

  /**
   * Locks and claims left: the library's keys under the prefix (but the dead set, the reaper's leadership and settled
   * idempotency records), every lane's BullMQ deduplication keys, in-progress records of the PostgreSQL store.
   */
  async heldLocks(): Promise<string[]> {
    const held: string[] = [];
    for (const key of await this.scan(`${this.prefix}:*`)) {
      if (key.includes(':{dead}:') || key.includes(':{reaper}:')) continue;
      if (key.endsWith(':idempotency')) {
        const state = await this.redis.admin.hget(key, 'state');
        if (state !== 'in_progress') continue;
      }
      held.push(key);
    }
    for (const lane of this.lanes) held.push(...(await this.scan(`bull:${lane.queue}:de:*`)));
    const { rows } = await this.pool.query<{ key: string }>(
      `SELECT key FROM ${this.tables.idem} WHERE state = 'in_progress'`,
    );
    held.push(...rows.map((row) => `postgres:${this.tables.idem}:${row.key}`));
    return held;
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

  /** Dead-set entries (duplicates refused at enqueue): lane (by queue), key, the job that held the lock. */
  async deadSet(): Promise<{ queue: string; key: string | undefined; existingJobId: string | undefined }[]> {
    const entries = await this.redis.admin.hgetall(`${this.prefix}:{dead}:entries`);
    return Object.values(entries).map((json) => {
      const entry = JSON.parse(json) as { queue: string; data?: { key?: string }; existingJobId?: string };
      return { queue: entry.queue, key: entry.data?.key, existingJobId: entry.existingJobId };
    });
  }

  /**
   * The invariants, lane by lane, after quiescence: one effect per event; every job completed, or refused into the
   * dead set with a holder of the same event that completed (none lost); no overlapping runs where the lock forbids
   * them; no lock or claim held once every lease had ended (`leaseBoundMs`).
   */
  async figures(
    leaseBoundMs: number,
  ): Promise<ChaosFigures & { lanes: LaneFigures[]; producerRestarts: number; problems: string[] }> {
    const lingering = await this.heldLocks();
    let stuck = lingering;
    const deadline = Date.now() + leaseBoundMs + 2_000;
    while (stuck.length > 0 && Date.now() < deadline) {
      await sleep(250);
      stuck = await this.heldLocks();
    }
    const problems: string[] = [];
    const runs = await this.runs();
    const { rows: effectRows } = await this.pool.query<{ lane: string; key: string; n: number }>(
      `SELECT lane, key, count(*)::int AS n FROM ${this.tables.effects} GROUP BY lane, key`,
    );
    const { rows: callRows } = await this.pool.query<{ lane: string; repeated: number }>(
      `SELECT lane, sum(calls - 1)::int AS repeated FROM ${this.tables.provider} GROUP BY lane`,
    );
    const dead = await this.deadSet();
    const lanes: LaneFigures[] = [];
    for (const lane of this.lanes) {
      const queue = this.queues.get(lane.name)!;
      const keys = laneKeys(lane);
      const effects = new Map(effectRows.filter((row) => row.lane === lane.name).map((row) => [row.key, row.n]));
      const completed = await queue.getJobs(['completed'], 0, -1);
      const failed = await queue.getJobs(['failed'], 0, -1);
      const completedById = new Map<string, Job>(completed.map((job) => [job.id!, job]));
      const laneRuns = runs.filter((run) => run.lane === lane.name);
      const missing = keys.filter((key) => !effects.has(key));
      const duplicates = [...effects.values()].reduce((n, count) => n + Math.max(0, count - 1), 0);
      const notCompleted = [...this.enqueued]
        .filter(([id, job]) => job.lane === lane.name && !completedById.has(id.slice(lane.name.length + 1)))
        .map(([id]) => id);
      // A refused duplicate must name a holder of the same event that completed.
      const refused = dead.filter((entry) => entry.queue === lane.queue);
      const orphanRefusals = refused.filter((entry) => {
        const holder = entry.existingJobId === undefined ? undefined : completedById.get(entry.existingJobId);
        return (holder?.data as { key?: string } | undefined)?.key !== entry.key;
      });
      const overlaps = this.overlaps(laneRuns);
      const overlapForbidden = lockForbidsOverlap(lane);
      if (missing.length)
        problems.push(`lane ${lane.name}: ${missing.length} events without effect: ${missing.slice(0, 5).join(', ')}`);
      if (duplicates) {
        const twice = [...effects].filter(([, n]) => n > 1).map(([key, n]) => `${key}×${n}`);
        problems.push(`lane ${lane.name}: duplicate effects: ${twice.slice(0, 10).join(', ')}`);
      }
      if (failed.length) {
        problems.push(
          `lane ${lane.name}: ${failed.length} failed jobs: ${failed
            .slice(0, 5)
            .map((job) => `${job.id} ${(job.data as { key: string }).key}: ${job.failedReason}`)
            .join('; ')}`,
        );
      }
      if (notCompleted.length)
        problems.push(`lane ${lane.name}: enqueued, not completed: ${notCompleted.slice(0, 5).join(', ')}`);
      if (orphanRefusals.length) {
        problems.push(`lane ${lane.name}: ${orphanRefusals.length} refusals without a completed holder of the event`);
      }
      if (overlaps.length && overlapForbidden) {
        problems.push(
          `lane ${lane.name} (${lane.lock}): overlapping runs: ${overlaps
            .slice(0, 3)
            .map(
              ({ key, first, second }) =>
                `${key}: run ${first.id} (${first.worker}) and ${second.id} (${second.worker})`,
            )
            .join('; ')}`,
        );
      }
      lanes.push({
        lane: lane.name,
        lock: lane.lock,
        client: lane.lock === 'none' || lane.lock === 'while_executing' ? '—' : (lane.client ?? 'log'),
        idem: lane.idem,
        copies: lane.copies,
        events: keys.length,
        jobs: completed.length + failed.length,
        deliveries: [...completed, ...failed].reduce((n, job) => n + job.attemptsStarted, 0),
        handlerRuns: laneRuns.length,
        effects: [...effects.values()].reduce((a, b) => a + b, 0),
        repeatedProviderCalls: callRows.find((row) => row.lane === lane.name)?.repeated ?? 0,
        refused: refused.length,
        takeovers: laneRuns.filter((run) => run.takeover).length,
        duplicates,
        lost: missing.length + failed.length + notCompleted.length + orphanRefusals.length,
        overlaps: overlaps.length,
        overlapForbidden,
      });
    }
    if (stuck.length) problems.push(`locks or claims left: ${stuck.slice(0, 10).join(', ')}`);
    if (this.gaveUp.length) problems.push(`producers gave up on: ${this.gaveUp.slice(0, 10).join(', ')}`);
    const sum = (field: keyof LaneFigures) => lanes.reduce((n, lane) => n + (lane[field] as number), 0);
    return {
      scenario: this.options.scenario,
      processes: {
        workers: this.workers.length,
        producers: this.producers.length,
        restarts: this.restarts,
      },
      producerRestarts: this.producers.length - this.options.producers,
      events: sum('events'),
      enqueueCalls: this.enqueueCalls,
      jobs: sum('jobs'),
      deliveries: sum('deliveries'),
      handlerRuns: runs.length,
      effects: sum('effects'),
      faults: { ...this.faults },
      duplicates: sum('duplicates'),
      lost: sum('lost'),
      overlaps: lanes.filter((lane) => lane.overlapForbidden).reduce((n, lane) => n + lane.overlaps, 0),
      lingeringLocks: lingering.length,
      stuckLocks: stuck.length,
      durationMs: Date.now() - this.started,
      lanes,
      problems,
    };
  }

  /**
   * How the worker processes ended: SIGKILLed (by the scenario or by themselves), stopped by SIGTERM (exit 0, or not),
   * and `crashed`: exited on their own (no signal sent), with the end of their stderr.
   */
  workerExits(): { killed: number; sigtermClean: number; sigtermUnclean: string[]; crashed: string[] } {
    const exits = { killed: 0, sigtermClean: 0, sigtermUnclean: [] as string[], crashed: [] as string[] };
    for (const worker of this.workers) {
      const exit = worker.exit;
      if (!exit) continue;
      // The end of its stderr: an uncaught error's message and stack are the last lines Node prints.
      const lines = exit.stderr.trim().split('\n');
      const tail = `${worker.label}: code ${exit.code}, signal ${exit.signal}: ${lines.slice(-25).join(' | ')}`;
      if (exit.signal === 'SIGKILL') exits.killed++;
      else if (worker.terminated && exit.code === 0) exits.sigtermClean++;
      else if (worker.terminated) exits.sigtermUnclean.push(tail.slice(-1500));
      else {
        exits.crashed.push(tail.slice(-4000));
        appendFileSync(CRASH_LOG, `\n==== ${this.id} ${worker.label} (code ${exit.code})\n${exit.stderr}\n`);
      }
    }
    return exits;
  }

  /** Kills every process, closes clients, drops the tables and stops the Redis server. */
  async close(): Promise<void> {
    this.stopRestarting();
    for (const loop of this.loops) loop.atLeast = 0;
    await this.stopFaults().catch(() => undefined);
    for (const slot of this.slots) slot.finished = true; // no producer restart
    for (const worker of this.workers) if (!worker.exit) worker.fixture.child.kill('SIGKILL');
    for (const producer of this.producers) producer.child.kill('SIGKILL');
    await Promise.all([...this.workers.map((w) => w.fixture.exited), ...this.producers.map((p) => p.exited)]);
    for (const queue of this.queues.values()) await queue.close().catch(() => undefined);
    for (const table of Object.values(this.tables)) await this.pool.query(`DROP TABLE IF EXISTS ${table}`);
    await this.pool.end();
    await this.redis.stop();
  }
}
