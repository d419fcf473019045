import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { Cluster, Redis } from 'ioredis';
import { MAX_TIMER_MS } from '../../common/option-values.js';
import { JobInterceptor } from '../../nest/job.interceptor.js';
import type { UniqueJobsModuleOptions } from '../../options/unique-jobs-module-options.interface.js';
import { scanNodes } from '../../redis/scan.js';
import { DEFAULT_REAPER_INTERVAL, UniqueJobsReaper } from '../../nest/unique-jobs.reaper.js';
import { scriptSources } from '../../redis/redis-scripts.js';
import { UNIQUE_JOBS_REDIS } from '../../nest/unique-jobs.constants.js';
import { UNIQUE_JOBS_MODULE_OPTIONS } from '../../nest/unique-jobs.module-definition.js';
import type {
  ReaperHealth,
  UniqueJobsHealthDetails,
  UniqueJobsHealthOptions,
  UniqueJobsHealthResult,
} from './interfaces/unique-jobs-health.interface.js';

const DEFAULT_TIMEOUT = 1000;

/**
 * A `@nestjs/terminus` health indicator for unique jobs (it returns terminus's result shape, so it needs nothing from
 * terminus itself): the lock store answers PING in time, the library's Lua scripts are loaded (any missing after a
 * Redis restart or flush is loaded again, which also proves scripting works), the dead set's size, and when the orphan
 * reaper last ran. `down` when Redis fails or is too slow; `degraded` (HTTP 200 in terminus) when the dead set is
 * over `deadSetThreshold` or the reaper is late.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.uniqueJobs.isHealthy('uniqueJobs')]); }
 * ```
 */
@Injectable()
export class UniqueJobsHealthIndicator {
  private readonly createdAt = Date.now();

  constructor(
    private readonly interceptor: JobInterceptor,
    private readonly moduleRef: ModuleRef,
  ) {}

  /** Checks the library's state; the details are reported under `key`. Never throws. */
  async isHealthy<const Key extends string>(
    key: Key,
    options: UniqueJobsHealthOptions = {},
  ): Promise<UniqueJobsHealthResult<Key>> {
    const details = await this.check(options);
    return { [key]: details } as UniqueJobsHealthResult<Key>;
  }

  private async check(options: UniqueJobsHealthOptions): Promise<UniqueJobsHealthDetails> {
    // Called per probe with whatever the caller read (an env var may give a string): a value a timer cannot take counts
    // as the default, never as a deadline that fires at once.
    const timeout = Number(options.timeout ?? DEFAULT_TIMEOUT);
    const bounded = Number.isFinite(timeout) && timeout >= 1 && timeout <= MAX_TIMER_MS ? timeout : DEFAULT_TIMEOUT;
    const end = Date.now() + bounded;
    const within = <T>(operation: Promise<T>, what: string) => withDeadline(operation, end, what);
    const details: UniqueJobsHealthDetails = { status: 'up', store: 'down', reaper: this.reaperHealth(options) };
    const client = this.moduleRef.get<{ client: Redis | Cluster }>(UNIQUE_JOBS_REDIS, { strict: false }).client;
    try {
      const started = performance.now();
      await within(client.ping(), 'PING');
      details.latencyMs = Math.round((performance.now() - started) * 10) / 10;
      details.store = 'up';
      details.scripts = await within(loadScripts(client), 'checking the scripts');
      details.deadSet = await within(this.interceptor.deadSet.size(), 'reading the dead set size');
    } catch (error) {
      return { ...details, status: 'down', message: `Lock store: ${(error as Error).message}` };
    }
    const problems: string[] = [];
    if (options.deadSetThreshold !== undefined && details.deadSet > options.deadSetThreshold) {
      problems.push(`the dead set holds ${details.deadSet} entries (threshold ${options.deadSetThreshold})`);
    }
    if (details.reaper.state === 'late')
      problems.push(`the orphan reaper has not run since ${details.reaper.lastRunAt ?? 'startup'}`);
    return problems.length === 0 ? details : { ...details, status: 'degraded', message: problems.join('; ') };
  }

  private reaperHealth(options: UniqueJobsHealthOptions): ReaperHealth {
    let reaper: UniqueJobsReaper;
    try {
      reaper = this.moduleRef.get(UniqueJobsReaper, { strict: false });
    } catch {
      return { state: 'not configured' };
    }
    const moduleOptions = this.moduleRef.get<UniqueJobsModuleOptions>(UNIQUE_JOBS_MODULE_OPTIONS, { strict: false });
    const interval =
      moduleOptions.enabled === false ? false : (moduleOptions.reaper?.interval ?? DEFAULT_REAPER_INTERVAL);
    const report = reaper.lastReport;
    const lastRun = report ? report.startedAt + report.durationMs : undefined;
    const health: ReaperHealth = {
      state: report ? 'ok' : 'not run yet',
      ...(report
        ? { lastRunAt: new Date(lastRun!).toISOString(), leader: report.leader, complete: report.complete }
        : {}),
    };
    if (interval === false) return report ? health : { state: 'idle' };
    const maxAge = options.reaperMaxAge ?? 3 * interval;
    if (Date.now() - (lastRun ?? this.createdAt) > maxAge) health.state = 'late';
    return health;
  }
}

/** Makes sure every library script is in the script cache of every node; resolves how many had to be loaded. */
async function loadScripts(client: Redis | Cluster): Promise<{ total: number; loadedNow: number }> {
  const scripts = scriptSources().map(({ lua }) => ({ lua, sha: createHash('sha1').update(lua).digest('hex') }));
  let loadedNow = 0;
  for (const node of scanNodes(client)) {
    const exists = (await node.script('EXISTS', ...scripts.map((script) => script.sha))) as number[];
    for (const [i, script] of scripts.entries()) {
      if (exists[i] === 1) continue;
      await node.script('LOAD', script.lua);
      loadedNow++;
    }
  }
  return { total: scripts.length, loadedNow };
}

/** The operation's result, or a rejection naming it when `end` (ms since epoch) comes first. */
function withDeadline<T>(operation: Promise<T>, end: number, what: string): Promise<T> {
  operation.catch(() => undefined); // a late failure after the deadline has nobody to report to
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out`)), Math.max(0, end - Date.now()));
  });
  return Promise.race([operation, deadline]).finally(() => clearTimeout(timer));
}
