// The real system of the model test: one Nest application with BullMQ, the unique-jobs module and two queues (`plain`,
// and `capped` whose worker has `maxStartedAttempts`), each consumed by a processor that carries every lock
// configuration (configs.ts) as one job name, with real workers on a real Redis. Every handler run blocks on a gate of
// its own until a command decides how that attempt ends. Booted once per test file and shared by every sequence.
import 'reflect-metadata';
import { setImmediate as nextMacrotask } from 'node:timers/promises';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import { DelayedError, UnrecoverableError, Worker, type Job, type Queue, type WorkerOptions } from 'bullmq';
import { Redis } from 'ioredis';
import type { Subscription } from 'rxjs';
import {
  UniqueJob,
  UniqueJobsModule,
  UniqueJobsReaper,
  UniqueJobsService,
  type ReapReport,
  type UniqueJobEvent,
} from '../../lib/index.js';
import { RESCHEDULES_FIELD } from '../../lib/redis/keys.js';
import { parseRuntimeLockOwner } from '../../lib/redis/runtime-lock-owner.js';
import { uniqueName } from '../support/redis.js';
import { CONFIGS, LONG, MAX_STARTED_ATTEMPTS, type QueueRole, uniqueOptionsOf } from './configs.js';
import type { JobState } from './promises.js';

/** BullMQ's key prefix (the default; the model test runs on a single Redis). */
export const BULL_PREFIX = 'bull';
/** How long a rate-limited worker waits before it fetches again. */
const RATE_LIMIT_MS = 20;
/** A job waiting this long means its worker's loop is not fetching (see {@link System.nudge}). */
const NUDGE_AFTER_MS = 100;
/** Longest a step may take to settle before the test reports the jobs that never did. */
const SETTLE_TIMEOUT_MS = 20_000;

/** How the test ends one attempt of a job. */
export type Action =
  | 'succeed'
  | 'fail'
  | 'unrecoverable'
  | 'delay'
  | 'rateLimit'
  | 'nameUnrecoverable' // an Error named 'UnrecoverableError' (BullMQ compares by name too)
  | 'nameDelayed'; // moveToDelayed + an Error named 'DelayedError'

export const ACTIONS: readonly Action[] = [
  'succeed',
  'fail',
  'unrecoverable',
  'delay',
  'rateLimit',
  'nameUnrecoverable',
  'nameDelayed',
];

/** The data of every model job. */
export interface ModelJobData {
  /** The lock arguments: one key per digest of a sequence. */
  key: string;
  /** The sequence that added it. */
  seq: number;
  /** Unique per add, to find jobs whose ids an API call did not return. */
  tag: string;
}

/** One call of the handler: one attempt of a job, held at its gate. */
export interface Run {
  readonly no: number;
  readonly seq: number;
  readonly queue: QueueRole;
  readonly jobId: string;
  readonly name: string;
  readonly key: string;
  readonly attemptsStarted: number;
  /** Redis server time (µs) when the handler started and when it ended (or was killed). */
  start?: number;
  end?: number;
  /** starting → blocked (at its gate) → released (the test chose an action) → ended; or blocked → killed. */
  status: 'starting' | 'blocked' | 'released' | 'ended' | 'killed';
  action?: Action;
  release(action: Action): void;
}

/** Wakes up whoever waits for "something happened" (a run started or ended, a worker event). */
class Pulse {
  private waiters: (() => void)[] = [];

  notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Resolves at the next notification, or after `ms` at the latest. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== wake);
        resolve();
      }, ms);
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      this.waiters.push(wake);
    });
  }
}

export interface JobSnapshot {
  state: JobState;
  /** `attemptsStarted` (BullMQ's `ats`). */
  started: number;
  /** Every start was put back by the `reschedule` strategy before the handler (`ats` = reschedules, `atm` 0). */
  neverRan: boolean;
}

/** The lock keys of one digest, as Redis holds them. */
export interface LockSnapshot {
  /** Value of the fast-path key (BullMQ's deduplication key), or null. */
  fast: string | null;
  /** Members of the general-path keys and of the run-time lock. */
  queued: string[];
  expiring: string[];
  running: string[];
  /** PTTL of the `until_expired` key (-2: absent). */
  expiringTtl: number;
}

/** Where one digest's locks live: the keys, from the library's public `lockKey`. */
export interface DigestKeys {
  fast: string;
  queued: string;
  expiring: string;
  running: string;
}

function redisOptions() {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    maxRetriesPerRequest: null,
  };
}

const namedError = (name: string, message: string) => Object.assign(new Error(message), { name });

export class System {
  readonly runs: Run[] = [];
  /** Every event of `service.events$`, in order. */
  readonly events: UniqueJobEvent[] = [];
  /** `<seq>:<job id>` of the jobs the workers moved to active (a job removed on completion existed if a worker saw it). */
  readonly seenByWorker = new Set<string>();
  /** Errors the workers emitted (kept for the failure report). */
  readonly workerErrors: string[] = [];
  private readonly pulse = new Pulse();
  private runNo = 0;
  private subscription?: Subscription;

  private constructor(
    readonly moduleRef: TestingModule,
    readonly redis: Redis,
    /** The connection given to the library (`forRoot({ connection })`): a PING on it follows every command it sent. */
    readonly libClient: Redis,
    readonly prefix: string,
    readonly queues: Record<QueueRole, Queue>,
    readonly workers: Record<QueueRole, Worker>,
  ) {}

  get service(): UniqueJobsService {
    return this.moduleRef.get(UniqueJobsService);
  }

  static async boot(): Promise<System> {
    const redis = new Redis(redisOptions());
    const libClient = new Redis(redisOptions());
    // The run's and this file's tags and a random part (uniqueName): the end-of-run check finds anything left.
    const suffix = uniqueName('m').slice('m-'.length);
    const prefix = `ujmodel-${suffix}`;
    const names: Record<QueueRole, string> = { plain: `model-plain-${suffix}`, capped: `model-capped-${suffix}` };
    const ref: { system?: System } = {};
    const handle = (role: QueueRole, worker: Worker, job: Job<ModelJobData>, token?: string) =>
      ref.system!.handle(role, worker, job, token);
    const base: Partial<WorkerOptions> = {
      concurrency: 10_000, // a waiting job is picked at once, whatever is held
      stalledInterval: 100, // a job whose BullMQ lock is gone is recovered within two intervals
      maxStalledCount: 1,
    };
    const processors = [
      processorClass('plain', names.plain, base, handle),
      processorClass('capped', names.capped, { ...base, maxStartedAttempts: MAX_STARTED_ATTEMPTS }, handle),
    ];
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: names.plain }, { name: names.capped }),
        UniqueJobsModule.forRoot({
          logger: false,
          prefix,
          connection: libClient,
          reaper: { interval: false, grace: 0 },
        }),
      ],
      providers: processors,
    }).compile();
    await moduleRef.init();
    const queues = {
      plain: moduleRef.get<Queue>(getQueueToken(names.plain)),
      capped: moduleRef.get<Queue>(getQueueToken(names.capped)),
    };
    const workers = {
      plain: moduleRef.get<WorkerHost>(processors[0]).worker,
      capped: moduleRef.get<WorkerHost>(processors[1]).worker,
    };
    const system = (ref.system = new System(moduleRef, redis, libClient, prefix, queues, workers));
    await system.start();
    return system;
  }

  private async start(): Promise<void> {
    this.subscription = this.service.events$.subscribe((event) => this.events.push(event));
    for (const worker of Object.values(this.workers)) {
      await worker.waitUntilReady();
      worker.on('active', (job: Job<ModelJobData>) => {
        this.seenByWorker.add(`${job.data.seq}:${job.id}`);
        this.pulse.notify();
      });
      for (const event of ['completed', 'failed', 'stalled', 'drained'] as const) {
        worker.on(event, () => this.pulse.notify());
      }
      worker.on('error', (error: Error) => {
        this.workerErrors.push(error.message);
        this.pulse.notify();
      });
    }
  }

  /** The processor body of every model job. */
  private async handle(role: QueueRole, worker: Worker, job: Job<ModelJobData>, token?: string): Promise<unknown> {
    let release!: (action: Action) => void;
    const gate = new Promise<Action>((resolve) => (release = resolve));
    const run: Run = {
      no: ++this.runNo,
      seq: job.data.seq,
      queue: role,
      jobId: job.id!,
      name: job.name,
      key: job.data.key,
      attemptsStarted: job.attemptsStarted,
      status: 'starting',
      release: (action) => {
        if (run.status !== 'blocked') throw new Error(`run ${run.no} of job ${run.jobId} is ${run.status}`);
        run.status = 'released';
        run.action = action;
        release(action);
      },
    };
    this.runs.push(run);
    this.pulse.notify();
    run.start = await this.time();
    run.status = 'blocked';
    this.pulse.notify();
    const action = await gate;
    const end = async () => {
      run.end = await this.time();
      run.status = 'ended';
      this.pulse.notify();
    };
    switch (action) {
      case 'succeed':
        await end();
        return `ran:${job.data.tag}`;
      case 'fail':
        await end();
        throw new Error('attempt failed');
      case 'unrecoverable':
        await end();
        throw new UnrecoverableError('unrecoverable');
      case 'nameUnrecoverable':
        await end();
        throw namedError('UnrecoverableError', 'unrecoverable, by name only');
      case 'delay':
        await job.moveToDelayed(Date.now() + LONG, token);
        await end();
        throw new DelayedError();
      case 'nameDelayed':
        await job.moveToDelayed(Date.now() + LONG, token);
        await end();
        throw namedError('DelayedError', 'delayed, by name only');
      case 'rateLimit':
        await worker.rateLimit(RATE_LIMIT_MS);
        await end();
        throw Worker.RateLimitError();
    }
  }

  /** Redis server time in µs (handler starts and ends are compared on one clock). */
  async time(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1_000_000 + Number(micros);
  }

  /**
   * Kills a run as a crashed worker would be: from now on nobody renews the job's BullMQ lock, so the stalled-job
   * check recovers the job (same id) within two `stalledInterval`s. The run's handler never continues (its gate stays
   * pending; teardown closes the workers with `force`).
   */
  async kill(run: Run): Promise<void> {
    if (run.status !== 'blocked') throw new Error(`run ${run.no} of job ${run.jobId} is ${run.status}`);
    run.end = await this.time();
    run.status = 'killed';
    await this.redis.del(`${this.queues[run.queue].qualifiedName}:${run.jobId}:lock`);
  }

  /** The latest run of a job id in a sequence. */
  lastRun(seq: number, jobId: string): Run | undefined {
    for (let i = this.runs.length - 1; i >= 0; i--) {
      const run = this.runs[i];
      if (run.seq === seq && run.jobId === jobId) return run;
    }
    return undefined;
  }

  async snapshotJobs(queue: QueueRole, ids: readonly string[]): Promise<Map<string, JobSnapshot>> {
    const q = this.queues[queue];
    const [states, counts] = await Promise.all([
      Promise.all(ids.map((id) => q.getJobState(id))),
      Promise.all(ids.map((id) => this.redis.hmget(`${q.qualifiedName}:${id}`, 'ats', 'atm', RESCHEDULES_FIELD))),
    ]);
    return new Map(
      ids.map((id, i) => {
        const [started, made, rescheduled] = counts[i].map((count) => Number(count ?? 0));
        const neverRan = started === 0 || (made === 0 && started === rescheduled);
        return [id, { state: states[i] as JobState, started, neverRan }];
      }),
    );
  }

  async snapshotLocks(keys: readonly DigestKeys[]): Promise<LockSnapshot[]> {
    const pipeline = this.redis.pipeline();
    for (const k of keys) {
      pipeline.get(k.fast);
      pipeline.zrange(k.queued, '0', '-1');
      pipeline.zrange(k.expiring, '0', '-1');
      pipeline.zrange(k.running, '0', '-1');
      pipeline.pttl(k.expiring);
    }
    const replies = (await pipeline.exec())!.map(([error, value]) => {
      if (error) throw error;
      return value;
    });
    return keys.map((_, i) => {
      const [fast, queued, expiring, running, expiringTtl] = replies.slice(i * 5, i * 5 + 5);
      return {
        fast: fast as string | null,
        queued: (queued as string[]).sort(),
        expiring: (expiring as string[]).sort(),
        running: (running as string[]).map((owner) => parseRuntimeLockOwner(owner).jobId).sort(),
        expiringTtl: expiringTtl as number,
      };
    });
  }

  /**
   * Waits until nothing of the sequence is in flight between states: no job waiting or prioritized (the workers pick
   * them at once), every active job held at the gate of its latest run, no run starting or finishing. Woken by every run
   * transition and worker event, with a 10 ms poll for transitions no event reports (a reschedule, a stalled-job check).
   * Then a barrier: a PING on the library's connection and on each worker's, so every lock write the library sent
   * when those jobs moved has landed. Resolves the job states.
   */
  async settle(seq: number, queue: QueueRole, ids: readonly string[]): Promise<Map<string, JobSnapshot>> {
    const deadline = Date.now() + SETTLE_TIMEOUT_MS;
    let waitingSince: number | undefined;
    for (;;) {
      const jobs = await this.snapshotJobs(queue, ids);
      const busy = this.inFlight(seq, jobs);
      if (busy.length === 0) {
        await this.barrier();
        return jobs;
      }
      if (Date.now() > deadline) {
        throw new Error(`the system did not settle in ${SETTLE_TIMEOUT_MS} ms: ${busy.join('; ')}`);
      }
      const waiting = [...jobs.values()].some(({ state }) => state === 'waiting' || state === 'prioritized');
      waitingSince = waiting ? (waitingSince ?? Date.now()) : undefined;
      if (waitingSince !== undefined && Date.now() - waitingSince > NUDGE_AFTER_MS) {
        await this.nudge(queue);
        waitingSince = undefined;
      }
      await this.pulse.wait(10);
    }
  }

  /**
   * Wakes a worker's main loop. After a rate limit, BullMQ's worker fetches again only once one of its running jobs
   * ends; here handlers end only when a command says so (or never: a killed run), so a job sent back to wait would wait
   * for the next command. `resume()` after `pause(true)` hands the loop a resolved promise: it waits out the rate limit
   * and fetches.
   */
  private async nudge(queue: QueueRole): Promise<void> {
    const worker = this.workers[queue];
    await worker.pause(true);
    await worker.resume();
  }

  /** What is still moving (empty when settled). */
  private inFlight(seq: number, jobs: Map<string, JobSnapshot>): string[] {
    const busy: string[] = [];
    for (const run of this.runs) {
      if (run.seq === seq && (run.status === 'starting' || run.status === 'released')) {
        busy.push(`run ${run.no} of job ${run.jobId} is ${run.status}`);
      }
      // The handler ended, but the processor around it (the library's steps after the handler: a failed attempt's
      // take-back, a park, the release) has not returned yet: BullMQ still tracks the job. A handler that moved its own
      // job (moveToDelayed + DelayedError) shows the job `delayed` before these steps are done.
      if (run.seq === seq && run.status === 'ended' && this.lastRun(seq, run.jobId) === run && this.tracks(run)) {
        busy.push(`run ${run.no} of job ${run.jobId} ended, its processor has not returned`);
      }
    }
    for (const [id, { state }] of jobs) {
      if (state === 'waiting' || state === 'prioritized') busy.push(`job ${id} is ${state}`);
      if (state === 'active' && this.lastRun(seq, id)?.status !== 'blocked') {
        busy.push(`job ${id} is active, its latest run ${this.lastRun(seq, id)?.status ?? 'not started'}`);
      }
    }
    return busy;
  }

  /**
   * Whether the run's worker still tracks its job (BullMQ's lock manager: from the fetch until the processor returned
   * or threw, just before BullMQ records the attempt's end). A BullMQ internal, read by the test only.
   */
  private tracks(run: Run): boolean {
    const manager = (this.workers[run.queue] as unknown as { lockManager?: { getTrackedJobIds(): string[] } })
      .lockManager;
    return manager?.getTrackedJobIds().includes(run.jobId) ?? false;
  }

  /** Every lock write the library sent before now has landed (see {@link settle}). */
  async barrier(): Promise<void> {
    const workerClients = await Promise.all(
      Object.values(this.workers).map(
        async (worker) => await (worker.getBackend() as unknown as { client: Promise<Redis> }).client,
      ),
    );
    // A write the library sends after an answer on one connection goes out on the next macrotask at the latest.
    for (const client of [this.libClient, ...workerClients, this.libClient]) {
      await client.ping();
      await nextMacrotask();
    }
  }

  /** One full pass of the orphan reaper (`run()` until a run completes its pass). */
  async reap(): Promise<ReapReport> {
    const reaper = this.moduleRef.get(UniqueJobsReaper);
    for (let i = 0; i < 20; i++) {
      const report = await reaper.run();
      if (!report.leader) throw new Error('the reaper is not the leader');
      if (report.complete) return report;
    }
    throw new Error('the reaper did not complete a pass in 20 runs');
  }

  /** Removes every job of a queue and the given keys (between sequences). */
  async wipe(queue: QueueRole, keys: readonly string[]): Promise<void> {
    await this.queues[queue].obliterate({ force: true });
    if (keys.length > 0) await this.redis.del(...keys);
  }

  async close(): Promise<void> {
    this.subscription?.unsubscribe();
    // Killed runs never end: close the workers without waiting for them.
    await Promise.all(Object.values(this.workers).map((worker) => worker.close(true)));
    await this.moduleRef.close();
    for (const queue of Object.values(this.queues)) {
      const keys = await this.scan(`${queue.qualifiedName}:*`);
      if (keys.length > 0) await this.redis.del(...keys);
    }
    const own = await this.scan(`${this.prefix}:*`);
    if (own.length > 0) await this.redis.del(...own);
    this.libClient.disconnect();
    await this.redis.quit();
  }

  async scan(pattern: string): Promise<string[]> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    return keys;
  }
}

type Handle = (role: QueueRole, worker: Worker, job: Job<ModelJobData>, token?: string) => Promise<unknown>;

/** A processor for one queue, with one `@UniqueJob` per lock configuration. */
function processorClass(
  role: QueueRole,
  queue: string,
  options: Partial<WorkerOptions>,
  handle: Handle,
): new () => WorkerHost {
  @Processor(queue, options as WorkerOptions)
  class ModelProcessor extends WorkerHost {
    async process(job: Job<ModelJobData>, token?: string): Promise<unknown> {
      return handle(role, this.worker, job, token);
    }
  }
  Object.defineProperty(ModelProcessor, 'name', { value: `ModelProcessor_${role}` });
  for (const config of CONFIGS) UniqueJob(uniqueOptionsOf(config))(ModelProcessor);
  return ModelProcessor;
}
