import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { Cluster, Redis } from 'ioredis';
import type * as PromClientModule from 'prom-client';
import type { Counter, Gauge, Histogram } from 'prom-client';
import type { Subscription } from 'rxjs';
import { UniqueJobsError } from '../../errors/unique-jobs.error.js';
import type { UniqueJobEvent } from '../../events/unique-job-event.interface.js';
import { UniqueJobsEvents } from '../../events/unique-jobs.events.js';
import { JobInterceptor } from '../../nest/job.interceptor.js';
import { UniqueJobsWorkerGuard } from '../../nest/worker.guard.js';
import type { UniqueJobsModuleOptions } from '../../options/unique-jobs-module-options.interface.js';
import { UNIQUE_JOBS_REDIS } from '../../nest/unique-jobs.constants.js';
import { UNIQUE_JOBS_MODULE_OPTIONS } from '../../nest/unique-jobs.module-definition.js';
import { DEFAULT_PREFIX } from '../../options/defaults.js';
import { within } from '../../common/within.js';
import { LockCountCache } from '../inspection/lock-count-cache.js';
import { LockInspector } from '../inspection/lock-inspector.js';
import type { InspectedQueue } from '../inspection/lock-inspection.interface.js';
import type { UniqueJobsMetricsOptions } from './interfaces/unique-jobs-metrics-options.interface.js';
import {
  DEFAULT_LOCK_HOLD_BUCKETS,
  DEFAULT_LOCK_WAIT_BUCKETS,
  DEFAULT_METRICS_PREFIX,
  UNIQUE_JOBS_METRICS_OPTIONS,
} from './unique-jobs-metrics.constants.js';

type PromClient = typeof PromClientModule;
type Labels = Record<string, string>;

/**
 * Longest a scrape waits for Redis (ms): past it (or on an error) the gauges have no value in that scrape. prom-client
 * waits for every collect, so a read left waiting (a Redis down, with `maxRetriesPerRequest: null`) would hold the
 * whole scrape, the application's other metrics with it. A held-locks count still running goes on, and a later scrape
 * within `cacheMs` of its end reports it.
 */
const COLLECT_TIMEOUT_MS = 3_000;

/** The idempotency outcome label of each idempotency event. */
function idempotencyOutcome(event: Extract<UniqueJobEvent, { type: `idempotency${string}` }>): string {
  switch (event.type) {
    case 'idempotencyClaimed':
      return event.takeover ? 'taken_over' : 'claimed';
    case 'idempotencyCompleted':
      return 'completed';
    case 'idempotencyReplayed':
      return event.state === 'completed' ? 'replayed' : 'replayed_failure';
    case 'idempotencyInProgress':
      return event.action === 'delayed' ? 'in_progress_delayed' : 'in_progress_failed';
    case 'idempotencyReleased':
      return 'released';
    case 'idempotencyHandedOver':
      return 'handed_over';
    case 'idempotencyFailureKept':
      return 'failure_kept';
    case 'idempotencyMismatch':
      return 'mismatch';
    case 'idempotencyLeaseLost':
      return 'lease_lost';
    case 'idempotencyMissingKey':
      return 'missing_key';
  }
}

/**
 * Prometheus metrics of the library (with `prom-client`, an optional peer imported when the module starts), fed by
 * the event stream of this process and, for the gauges, read from Redis on scrape. Names below use the default prefix
 * `unique_jobs_`:
 *
 * - `locks_acquired_total{queue,job_name,lock}` / `locks_released_total{queue,job_name,lock}`: `lock` is `enqueue` or
 *   `runtime`.
 * - `duplicates_total{queue,job_name,side,strategy}`: duplicates by the strategy that handled them (`log`, `raise`,
 *   `reject`, `replace`, `reschedule`, custom).
 * - `lock_lost_total{queue,job_name}`, `errors_total{queue,job_name}`, `reaped_total{kind}`.
 * - `idempotency_total{queue,job_name,outcome}`: `claimed`, `taken_over`, `completed`, `replayed`,
 *   `replayed_failure`, `in_progress_delayed`, `in_progress_failed`, `released`, `handed_over`, `failure_kept`,
 *   `mismatch`, `lease_lost`, `missing_key`.
 * - `lock_wait_seconds{queue,job_name}` (histogram): how long workers waited for run-time locks they got.
 * - `lock_hold_seconds{queue,job_name,lock}` (histogram): from taking a lock to releasing it.
 * - `held_locks{lock}` and `held_locks_scan_complete` (gauges, a bounded SCAN on scrape), `dead_set_size` (gauge).
 *
 * Counters count what this process saw: sum them over your processes.
 */
@Injectable()
export class UniqueJobsMetrics implements OnModuleInit, OnModuleDestroy {
  private subscription: Subscription | undefined;
  private readonly registered: string[] = [];
  private registry: UniqueJobsMetricsOptions['registry'];

  constructor(
    @Inject(UNIQUE_JOBS_METRICS_OPTIONS) private readonly options: UniqueJobsMetricsOptions,
    private readonly events: UniqueJobsEvents,
    private readonly interceptor: JobInterceptor,
    private readonly workerGuard: UniqueJobsWorkerGuard,
    private readonly moduleRef: ModuleRef,
  ) {}

  /**
   * Nest lifecycle hook: creates the metrics (named with `prefix`) in the registry (`registry`, or prom-client's global
   * `register`) and starts counting the library's events.
   *
   * @throws UniqueJobsError when `prom-client` is not installed.
   */
  async onModuleInit(): Promise<void> {
    const prom = await loadPromClient();
    const prefix = this.options.prefix ?? DEFAULT_METRICS_PREFIX;
    const registry = (this.registry = this.options.registry ?? prom.register);
    const registers = [registry as unknown as InstanceType<PromClient['Registry']>];
    const named = <T extends { name: string }>(config: T): T => {
      const name = `${prefix}${config.name}`;
      this.registered.push(name);
      return { ...config, name };
    };
    const counter = (name: string, help: string, labelNames: string[]): Counter =>
      new prom.Counter(named({ name, help, labelNames, registers }));
    const histogram = (name: string, help: string, labelNames: string[], buckets: number[]): Histogram =>
      new prom.Histogram(named({ name, help, labelNames, buckets, registers }));

    const acquired = counter('locks_acquired_total', 'Locks taken (enqueue or run-time)', [
      'queue',
      'job_name',
      'lock',
    ]);
    const released = counter('locks_released_total', 'Locks released', ['queue', 'job_name', 'lock']);
    const duplicates = counter('duplicates_total', 'Duplicates, by the strategy that handled them', [
      'queue',
      'job_name',
      'side',
      'strategy',
    ]);
    const lockLost = counter('lock_lost_total', 'Run-time locks lost before their job finished', ['queue', 'job_name']);
    const errors = counter('errors_total', 'Failed lock or idempotency bookkeeping', ['queue', 'job_name']);
    const reaped = counter('reaped_total', 'Orphaned locks and claims released by the reaper', ['kind']);
    const idempotency = counter('idempotency_total', 'Idempotency key transitions', ['queue', 'job_name', 'outcome']);
    const lockWait = histogram(
      'lock_wait_seconds',
      'Time workers waited for the run-time locks they got',
      ['queue', 'job_name'],
      this.options.lockWaitBuckets ?? DEFAULT_LOCK_WAIT_BUCKETS,
    );
    const lockHold = histogram(
      'lock_hold_seconds',
      'Time from taking a lock to releasing it',
      ['queue', 'job_name', 'lock'],
      this.options.lockHoldBuckets ?? DEFAULT_LOCK_HOLD_BUCKETS,
    );
    this.registerGauges(prom, named, registers);

    this.subscription = this.events.events$.subscribe((event) => {
      if (event.type === 'reaped') {
        reaped.inc({ kind: event.kind });
        return;
      }
      const job: Labels = { queue: event.queue, job_name: event.jobName };
      switch (event.type) {
        case 'locked':
          acquired.inc({ ...job, lock: event.lock });
          if (event.waitedMs !== undefined) lockWait.observe(job, event.waitedMs / 1000);
          return;
        case 'unlocked':
          released.inc({ ...job, lock: event.lock });
          if (event.heldMs !== undefined) lockHold.observe({ ...job, lock: event.lock }, event.heldMs / 1000);
          return;
        case 'duplicate':
          duplicates.inc({ ...job, side: event.side, strategy: event.strategy });
          return;
        case 'rejected':
          duplicates.inc({ ...job, side: event.side, strategy: 'reject' });
          return;
        case 'replaced':
          duplicates.inc({ ...job, side: 'client', strategy: 'replace' });
          return;
        case 'rescheduled':
          duplicates.inc({ ...job, side: 'server', strategy: 'reschedule' });
          return;
        case 'lockLost':
          lockLost.inc(job);
          return;
        case 'error':
          errors.inc(job);
          return;
        default:
          idempotency.inc({ ...job, outcome: idempotencyOutcome(event) });
      }
    });
  }

  /** Unregisters the metrics (so an application created again in the same process can register them anew). */
  onModuleDestroy(): void {
    this.subscription?.unsubscribe();
    for (const name of this.registered.splice(0)) this.registry?.removeSingleMetric(name);
  }

  private registerGauges(
    prom: PromClient,
    named: <T extends { name: string }>(config: T) => T,
    registers: InstanceType<PromClient['Registry']>[],
  ): void {
    const deadSet = this.interceptor.deadSet;
    new prom.Gauge(
      named({
        name: 'dead_set_size',
        help: 'Rejected duplicates kept in the dead set',
        registers,
        async collect(this: Gauge) {
          const size = await within(deadSet.size(), COLLECT_TIMEOUT_MS);
          // Redis out of reach: no value rather than a stale one (reset() would report 0 on a gauge without labels).
          if (size === undefined) this.remove({});
          else this.set(size);
        },
      }),
    );
    if (this.options.heldLocks === false) return;
    const counter = this.heldLockCounter();
    new prom.Gauge(
      named({
        name: 'held_locks',
        help: 'Lock keys held in Redis (a bounded SCAN on scrape; see held_locks_scan_complete)',
        labelNames: ['lock'],
        registers,
        async collect(this: Gauge) {
          const counts = await within(counter.get(), COLLECT_TIMEOUT_MS);
          if (counts === undefined) return this.reset();
          this.set({ lock: 'enqueue' }, counts.enqueueLocks);
          this.set({ lock: 'runtime' }, counts.runtimeLocks);
        },
      }),
    );
    new prom.Gauge(
      named({
        name: 'held_locks_scan_complete',
        help: '1 when the last held_locks count scanned the whole key space, 0 when it stopped at maxScans',
        registers,
        async collect(this: Gauge) {
          const counts = await within(counter.get(), COLLECT_TIMEOUT_MS);
          if (counts === undefined) this.remove({});
          else this.set(counts.complete ? 1 : 0);
        },
      }),
    );
  }

  private heldLockCounter(): LockCountCache {
    const redis = this.moduleRef.get<{ client: Redis | Cluster }>(UNIQUE_JOBS_REDIS, { strict: false });
    const moduleOptions = this.moduleRef.get<UniqueJobsModuleOptions>(UNIQUE_JOBS_MODULE_OPTIONS, { strict: false });
    const { cacheMs = 10_000, ...bounds } = this.options.heldLocks === false ? {} : (this.options.heldLocks ?? {});
    // The queues are read at each count: a queue guarded after the module started is counted too.
    const inspector = (): LockInspector => {
      const queues: InspectedQueue[] = [...this.interceptor.guardedQueues(), ...this.workerGuard.workerQueues()];
      return new LockInspector({ client: redis.client, prefix: moduleOptions.prefix ?? DEFAULT_PREFIX, queues });
    };
    return new LockCountCache(() => inspector().counts(bounds), cacheMs);
  }
}

async function loadPromClient(): Promise<PromClient> {
  try {
    // prom-client is CommonJS: its exports are named in Node, but may only be under `default` elsewhere.
    const loaded = await import('prom-client');
    const hasNamedExports = typeof (loaded as { Counter?: unknown }).Counter === 'function';
    return (hasNamedExports ? loaded : loaded.default) as PromClient;
  } catch (error) {
    throw new UniqueJobsError(
      `UniqueJobsMetricsModule needs the "prom-client" package: install it (npm install prom-client). ${(error as Error).message}`,
    );
  }
}
