// The fleet scenario's world (test/chaos/fleet.chaos.ts): a private Redis (AOF), PostgreSQL tables, lanes (a queue
// each, see test/fixtures/chaos-fleet.ts), worker processes that serve every lane and are restarted when they die,
// producer processes that are restarted from their progress when they are killed, fault loops, quiescence, stopping
// the workers, and the end-of-run invariants, lane by lane (./fleet-lanes.ts). What it shares with ChaosRun
// (./harness.ts) is in ./chaos-base.ts.
import { appendFileSync, mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, type Job } from 'bullmq';
import type pg from 'pg';
import { laneKeys, lockForbidsOverlap } from '../../fixtures/chaos-fleet.js';
import type { FleetProgress } from '../../fixtures/chaos-fleet-producer.js';
import type { FleetWorkerLane } from '../../fixtures/chaos-fleet-worker.js';
import { spawnFixture, type Fixture } from '../../support/fixtures.js';
import { pgPool, uniqueTable } from '../../support/postgres.js';
import { PrivateRedis } from '../../support/private-redis.js';
import { uniqueName } from '../../support/redis.js';
import { ChaosBase, unfinished, type ChaosWorker, type LedgerRun } from './chaos-base.js';
import {
  classifyExits,
  classifyIncidents,
  type IncidentRow,
  type Incidents,
  type WorkerExits,
} from './fleet-incidents.js';
import {
  effectOnce,
  laneProblems,
  providerCallChecks,
  providerLane,
  runsByKey,
  type LaneFigures,
} from './fleet-lanes.js';
import { createFleetTables } from './fleet-tables.js';
import type { ChaosFigures } from './harness.js';

/** A lane as the test declares it (the queue name is the run's). */
export type FleetLaneSpec = Omit<FleetWorkerLane, 'queue'>;

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

/** A worker process and what happened to it (`terminated`: SIGTERM sent by the scenario). */
export type FleetWorker = ChaosWorker;

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

/** Where the whole stderr of a worker that died by itself is written (the test's message has its end). */
const CRASH_LOG = new URL('../../../.build/chaos-fleet-crashes.log', import.meta.url);
mkdirSync(new URL('.', CRASH_LOG), { recursive: true });

export class FleetRun extends ChaosBase {
  readonly id = uniqueName('fleet');
  readonly prefix = uniqueName('ujfleet');
  readonly lanes: FleetWorkerLane[];
  readonly tables = {
    ledger: uniqueTable('fleet_ledger'),
    effects: uniqueTable('fleet_effects'),
    events: uniqueTable('fleet_events'),
    provider: uniqueTable('fleet_provider'),
    calls: uniqueTable('fleet_calls'),
    idem: uniqueTable('fleet_idem'),
  };
  /** application_name of the workers' store connections (the targets of pg_terminate_backend) and ledger ones. */
  readonly storeApp: string;
  readonly ledgerApp: string;
  readonly slots: ProducerSlot[] = [];
  readonly notes: Record<string, unknown> = {};
  /** Jobs the producers reported created: job id → lane and key. */
  readonly enqueued = new Map<string, { lane: string; key: string }>();
  readonly producerErrors: Record<string, number> = {};
  readonly gaveUp: string[] = [];
  /** Workers sent SIGTERM (by label): when, and when they printed {"closed":true} (their close steps all ended). */
  private readonly sigterms = new Map<string, { at: number; closedAt?: number }>();
  /** Redis restarts (SIGKILL + AOF reload): when the server was killed and when it answered again (ms). */
  readonly redisRestarts: { killedAt: number; upAt: number }[] = [];
  enqueueCalls = 0;
  duplicateAnswers = 0;
  refusedAnswers = 0;
  queues = new Map<string, Queue>();
  private allProduced!: Promise<void>;
  private producedResolve!: () => void;

  private constructor(
    readonly options: FleetOptions,
    redis: PrivateRedis,
    pool: pg.Pool,
  ) {
    super(redis, pool, true);
    const tag = this.id.replace(/[^a-z0-9]/g, '');
    this.storeApp = `chaos_store_${tag}`;
    this.ledgerApp = `chaos_ledger_${tag}`;
    this.lanes = options.lanes.map((lane) => ({ ...lane, queue: uniqueName(`fleet${lane.name}`) }));
  }

  static async create(options: FleetOptions): Promise<FleetRun> {
    const redis = await PrivateRedis.start({ appendonly: true });
    const run = new FleetRun(options, redis, pgPool(4));
    await createFleetTables(run.pool, run.tables);
    const { PostgresIdempotencyStore } = await import('../../../lib/idempotency/stores/postgres-idempotency.store.js');
    await new PostgresIdempotencyStore({ pool: run.pool, table: run.tables.idem }).migrate();
    for (const lane of run.lanes) {
      const queue = new Queue(lane.queue, { connection: { ...run.redisOptions(), maxRetriesPerRequest: null } });
      queue.on('error', () => undefined); // killed connections reconnect
      await queue.waitUntilReady();
      run.queues.set(lane.name, queue);
    }
    run.allProduced = new Promise((resolve) => (run.producedResolve = resolve));
    return run;
  }

  protected override baseEnv(): Record<string, string> {
    return { ...super.baseEnv(), LANES: JSON.stringify(this.lanes) };
  }

  // ───────────────────────────── workers ─────────────────────────────

  async startWorker(): Promise<FleetWorker> {
    return this.launchWorker(
      'chaos-fleet-worker',
      {
        LEDGER: this.tables.ledger,
        EFFECTS: this.tables.effects,
        EVENTS: this.tables.events,
        PROVIDER: this.tables.provider,
        CALLS: this.tables.calls,
        IDEM_TABLE: this.tables.idem,
        STORE_APP: this.storeApp,
        LEDGER_APP: this.ledgerApp,
        ...this.options.workerEnv,
      },
      () => this.startWorker(),
    );
  }

  /**
   * Stops every worker with SIGTERM (no restart from now on) and waits until each has exited: from then on nothing
   * renews a lease and no reaper runs, so what is left in Redis and PostgreSQL stays until its TTL. A worker still
   * booting is let finish booting first (a SIGTERM before it serves would kill it uncleanly).
   */
  async stopWorkers(timeoutMs = 60_000): Promise<void> {
    this.stopRestarting();
    const deadline = Date.now() + timeoutMs;
    const running = this.workers.filter((worker) => !worker.exit);
    while (running.some((worker) => !worker.ready && !worker.exit) && Date.now() < deadline) await sleep(50);
    for (const worker of running) if (!worker.exit) this.terminate(worker);
    await Promise.all(running.map((worker) => worker.fixture.exited));
  }

  /** Sends SIGTERM to a worker (a graceful stop), noting when, and when its close steps end. */
  terminate(worker: FleetWorker): void {
    const sigterm: { at: number; closedAt?: number } = { at: Date.now() };
    this.sigterms.set(worker.label, sigterm);
    worker.terminated = true;
    void worker.fixture
      .waitFor((message) => message.closed === true)
      .then(() => (sigterm.closedAt = Date.now()))
      .catch(() => undefined);
    worker.fixture.child.kill('SIGTERM');
  }

  /** Kills the Redis server and restarts it on its AOF, noting when (lost leases may follow: see {@link incidents}). */
  async restartRedis(): Promise<number> {
    const killedAt = Date.now();
    const downMs = await this.redis.restart();
    this.redisRestarts.push({ killedAt, upAt: Date.now() });
    return downMs;
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

  /** {@link ChaosBase.stopFaults}, giving up on a loop's minimum after `graceMs` (the test's fault counts say so). */
  override stopFaults(graceMs = 15_000): Promise<void> {
    return super.stopFaults(graceMs);
  }

  /** Jobs not finished yet, over every lane: waiting, delayed, prioritized, active. */
  async backlog(): Promise<number> {
    let n = 0;
    for (const queue of this.queues.values()) {
      const counts = await unfinished(queue);
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
    await this.waitUntilIdle('queues', timeoutMs, 500, async () => {
      let busy: Record<string, Record<string, number>> = {};
      for (const [name, queue] of this.queues) {
        const counts = await unfinished(queue);
        if (Object.values(counts).some((n) => n > 0)) busy = { ...busy, [name]: counts };
      }
      return Object.keys(busy).length === 0 ? undefined : busy;
    });
  }

  runs(): Promise<(LedgerRun & { lane: string })[]> {
    return this.ledgerRuns<{ lane: string }>(['lane']);
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
  heldLocks(): Promise<string[]> {
    return this.locksAndClaims(
      [':{dead}:', ':{reaper}:'],
      this.lanes.map((lane) => lane.queue),
      true,
    );
  }

  /**
   * Locks and claims left once every worker has stopped ({@link stopWorkers}: no reaper runs and no lease is renewed
   * any more, so neither can hide a leak). A worker stopped by SIGTERM releases what it holds; only a run killed by an
   * injected SIGKILL may leave a lease behind, and only until that lease ends (≤ `leaseMs` after its process died).
   * `lingering`: held at once; `unbounded`: held but not such a lease (a key without a TTL or whose TTL outlives a
   * lease taken at the last SIGKILL, an in-progress PostgreSQL claim: every event completed, so none may be left);
   * `stuck`: still held once a lease taken at the last SIGKILL has ended.
   */
  async locksAfterStop(leaseMs: number): Promise<{ lingering: string[]; unbounded: string[]; stuck: string[] }> {
    if (this.workers.some((worker) => !worker.exit)) throw new Error('locksAfterStop: a worker is still running');
    const lingering = await this.heldLocks();
    const killedAt = this.workers.filter((w) => w.exit?.signal === 'SIGKILL').map((w) => w.exit!.at);
    // 1 s for Redis's expiry and the time between the process's death and the test seeing it exit.
    const leaseEnd = Math.max(0, ...killedAt) + leaseMs + 1_000;
    const unbounded: string[] = [];
    for (const key of lingering) {
      if (key.startsWith('postgres:')) {
        unbounded.push(key);
        continue;
      }
      const ttl = await this.redis.admin.pttl(key);
      if (ttl === -2) continue; // gone since
      if (ttl < 0 || Date.now() + ttl > leaseEnd) unbounded.push(`${key} (pttl ${ttl})`);
    }
    let stuck = lingering;
    while (stuck.length > 0 && Date.now() < leaseEnd) {
      await sleep(250);
      stuck = await this.heldLocks();
    }
    return { lingering, unbounded, stuck };
  }

  /**
   * What the library reported during the run (EVENTS), checked against the faults injected:
   * - lost leases (`lockLost`, `idempotencyLeaseLost`): none may happen, but one reported while Redis was down
   *   (SIGKILL + AOF restart) or within a lease after, when it was down for more than a third of a lease: the lease
   *   keeper renews every third of a lease and cannot while the server is away, so such an outage can end a lease (the
   *   documented limit: a lease is a promise about time). The overlap and provider-call checks still apply to such
   *   runs.
   * - library `error` events: each must be one a fault explains (a terminated PostgreSQL backend, a Redis connection
   *   killed or a server restarted or loading, a flushed script cache); `unexplained` must be empty.
   * - `reaped`: what the orphan reaper released (reported; the lock check runs with the reaper stopped).
   */
  async incidents(leaseMs: number): Promise<Incidents> {
    const { rows } = await this.pool.query<IncidentRow>(
      `SELECT worker, type, job_id, detail, at FROM ${this.tables.events} WHERE type = ANY($1) ORDER BY id`,
      [['lockLost', 'idempotencyLeaseLost', 'error', 'reaped']],
    );
    return classifyIncidents(rows, this.faults, this.redisRestarts, leaseMs);
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
  async figures(leaseBoundMs: number): Promise<
    ChaosFigures & {
      lanes: LaneFigures[];
      producerRestarts: number;
      problems: string[];
      lingering: string[];
      unboundedLocks: string[];
    }
  > {
    const { lingering, unbounded, stuck } = await this.locksAfterStop(leaseBoundMs);
    const problems: string[] = [];
    const runs = await this.runs();
    const runById = new Map(runs.map((run) => [run.id, run]));
    const exitOf = new Map(this.workers.map((worker) => [worker.label, worker.exit]));
    const { rows: callRuns } = await this.pool.query<{ lane: string; key: string; run_id: string }>(
      `SELECT lane, key, run_id::text FROM ${this.tables.calls} ORDER BY id`,
    );
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
      // A lock-only lane has an effect per run: a run killed after its effect is run again (no duplicate to count).
      const duplicates = effectOnce(lane)
        ? [...effects.values()].reduce((n, count) => n + Math.max(0, count - 1), 0)
        : 0;
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
      // Plain lanes: the runs that called the provider, key by key. Two of them must never have overlapped (whatever
      // the lock: the claim forbids it), and none may have started after the run whose result completed the event
      // (every later delivery replays that result). So each repeated call follows a run that ended without completing
      // its attempt (killed, or it threw, or it was cut off between its return and BullMQ's completion).
      const { violations: providerViolations, repeatedAfter } = providerLane(lane)
        ? providerCallChecks(
            runsByKey(
              callRuns.filter((row) => row.lane === lane.name),
              runById,
            ),
            new Set(completed.map((job) => (job.returnvalue as { runId?: string } | null)?.runId).filter(Boolean)),
            (run) => exitOf.get(run.worker)?.signal === 'SIGKILL',
            (list) => this.overlaps(list),
          )
        : { violations: [], repeatedAfter: {} };
      problems.push(
        ...laneProblems(lane, {
          missing,
          effects,
          duplicates,
          failed,
          notCompleted,
          orphanRefusals,
          overlaps,
          overlapForbidden,
          providerViolations,
        }),
      );
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
        effectOnce: effectOnce(lane),
        repeatedProviderCalls: callRows.find((row) => row.lane === lane.name)?.repeated ?? 0,
        repeatedAfter,
        providerViolations: providerViolations.length,
        refused: refused.length,
        takeovers: laneRuns.filter((run) => run.takeover).length,
        duplicates,
        lost: missing.length + failed.length + notCompleted.length + orphanRefusals.length,
        overlaps: overlaps.length,
        overlapForbidden,
      });
    }
    if (unbounded.length) {
      problems.push(`locks or claims left that no killed run's lease explains: ${unbounded.slice(0, 10).join(', ')}`);
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
      // Effects of the lanes that promise one per event (a lock-only lane's are per run: in its lane's figures).
      effects: lanes.filter((lane) => lane.effectOnce).reduce((n, lane) => n + lane.effects, 0),
      faults: { ...this.faults },
      duplicates: sum('duplicates'),
      lost: sum('lost'),
      overlaps: lanes.filter((lane) => lane.overlapForbidden).reduce((n, lane) => n + lane.overlaps, 0),
      lingeringLocks: lingering.length,
      stuckLocks: stuck.length,
      lingering,
      unboundedLocks: unbounded,
      durationMs: Date.now() - this.started,
      lanes,
      problems,
    };
  }

  /**
   * How the worker processes ended: SIGKILLed (by the scenario or by themselves), stopped by SIGTERM (exit 0, or not),
   * and `crashed`: exited on their own (no signal sent), with the end of their stderr.
   */
  workerExits(): WorkerExits {
    return classifyExits(this.workers, this.sigterms, this.redisRestarts, (worker, stderr) =>
      appendFileSync(CRASH_LOG, `\n==== ${this.id} ${worker.label} (code ${worker.exit?.code})\n${stderr}\n`),
    );
  }

  /** No producer restart once closing. */
  protected override beforeKill(): void {
    for (const slot of this.slots) slot.finished = true;
  }

  protected openQueues(): Queue[] {
    return [...this.queues.values()];
  }
}
