import { Inject, Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { IdempotencyDefinitions } from '../idempotency/idempotency-definitions.js';
import { JobInterceptor } from './job.interceptor.js';
import { loggerOf } from '../common/logger.js';
import { UniqueJobsWorkerGuard } from './worker.guard.js';
import type { UniqueJobsModuleOptions } from '../options/unique-jobs-module-options.interface.js';
import { UNIQUE_JOBS_IDEMPOTENCY, UNIQUE_JOBS_REDIS } from './unique-jobs.constants.js';
import { UNIQUE_JOBS_MODULE_OPTIONS } from './unique-jobs.module-definition.js';
import { DEFAULT_PREFIX, DEFAULT_SHUTDOWN_TIMEOUT } from '../options/defaults.js';
import { within } from '../common/within.js';
import { LEAST_SAFE_GRACE } from '../options/reaper-options.js';
import { OrphanReaper } from '../ops/reaper/orphan-reaper.js';
import type { ReapReport } from '../ops/reaper/reap-report.interface.js';
import { asError } from '../errors/thrown.js';

/** Default time between reaper runs (ms). */
export const DEFAULT_REAPER_INTERVAL = 60_000;

/**
 * The orphan reaper of this application: runs {@link OrphanReaper} every `reaper.interval` ms (only the process that
 * holds the leadership works), on demand with {@link run}, and keeps the last report for health checks.
 */
@Injectable()
export class UniqueJobsReaper implements OnApplicationBootstrap {
  /** The report of the last run of this process (leader or not) that was not a dry run, if any. */
  lastReport: ReapReport | undefined;
  private readonly reaper: OrphanReaper;
  private readonly interval: number | false;
  private timer: NodeJS.Timeout | undefined;
  /** Runs are serialized: the timer's and on-demand ones never overlap in one process. */
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    @Inject(UNIQUE_JOBS_MODULE_OPTIONS) private readonly options: UniqueJobsModuleOptions,
    @Inject(UNIQUE_JOBS_REDIS) redis: { client: Redis | Cluster },
    interceptor: JobInterceptor,
    workerGuard: UniqueJobsWorkerGuard,
    events: UniqueJobsEvents,
    @Inject(UNIQUE_JOBS_IDEMPOTENCY) idempotency: IdempotencyDefinitions,
  ) {
    const { interval = DEFAULT_REAPER_INTERVAL, ...tuning } = options.reaper ?? {};
    this.interval = options.enabled === false ? false : interval;
    this.reaper = new OrphanReaper({
      client: redis.client,
      prefix: options.prefix ?? DEFAULT_PREFIX,
      queues: () => [...interceptor.guardedQueues(), ...workerGuard.workerQueues()],
      stores: () => idempotency.allStores(),
      options: tuning,
      leaderTtl: this.interval === false ? undefined : this.interval * 2,
      onReaped: (item) => events.emit({ type: 'reaped', ...item }),
    });
  }

  /**
   * Starts the timer (unless `reaper.interval` is `false` or the library is disabled); warns once when `reaper.grace`
   * is below {@link LEAST_SAFE_GRACE}.
   */
  onApplicationBootstrap(): void {
    const grace = this.options.reaper?.grace;
    if (grace !== undefined && grace < LEAST_SAFE_GRACE) {
      loggerOf(this.options.logger).warn(
        `reaper.grace is ${grace} ms, below ${LEAST_SAFE_GRACE}: a reaper run may release the general-path enqueue lock of a job whose add is still on its way (the lock is taken one round trip before the add), and a duplicate can then be enqueued beside it; use ${LEAST_SAFE_GRACE} or more (default 15000) unless no job is enqueued while the reaper runs (tests)`,
      );
    }
    this.schedule();
  }

  /**
   * Runs the reaper now (after the run in progress, if any). Resolves the report; `leader: false` when another
   * process holds the leadership.
   */
  run(options: { dryRun?: boolean } = {}): Promise<ReapReport> {
    const run = this.queue.then(() => this.reaper.run(options));
    this.queue = run.catch(() => undefined);
    return run.then((report) => {
      if (!report.dryRun) this.lastReport = report;
      return report;
    });
  }

  /**
   * Stops the timer, ends a run in progress (cut short if it waits out its grace) and gives the leadership up (called at
   * module shutdown).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.reaper.interrupt(); // a run waiting out its grace ends now, releasing nothing
    // A run held up by a statement that does not answer (a SQL store's prune behind a table lock, a database out of
    // reach) is waited for `shutdownTimeout` at most, then left: the application closes its pools under it.
    const { shutdownTimeout = DEFAULT_SHUTDOWN_TIMEOUT } = this.options;
    await (shutdownTimeout === false ? this.queue.catch(() => undefined) : within(this.queue, shutdownTimeout));
    await this.reaper.resign().catch(() => undefined);
  }

  private schedule(): void {
    if (this.interval === false || this.stopped) return;
    this.timer = setTimeout(() => {
      this.run()
        .then((report) => {
          if (report.deferred > 0) {
            loggerOf(this.options.logger).debug?.(
              `Orphan reaper: ${report.deferred} general-path lock owner(s) whose job is missing kept back while a large addBulk is in progress; checked again at the next run (the first 1,000) or when the pass finds them again`,
            );
          }
          if (report.failedKeys === 0) return;
          loggerOf(this.options.logger).warn(
            `Orphan reaper: ${report.failedKeys} key(s) could not be checked and were left alone (${report.firstFailure ?? 'no message'}); they are checked again next run`,
          );
        })
        .catch((error: unknown) =>
          loggerOf(this.options.logger).error(`Orphan reaper run failed: ${asError(error).message}`),
        )
        .finally(() => this.schedule());
    }, this.interval);
    this.timer.unref();
  }
}
