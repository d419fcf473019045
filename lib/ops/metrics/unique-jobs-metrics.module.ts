import { Module, type DynamicModule } from '@nestjs/common';
import { InvalidUniqueJobOptionsError } from '../../errors/invalid-unique-job-options.error.js';
import type { UniqueJobsMetricsOptions } from './interfaces/unique-jobs-metrics-options.interface.js';
import { UNIQUE_JOBS_METRICS_OPTIONS } from './unique-jobs-metrics.constants.js';
import { UniqueJobsMetrics } from './unique-jobs-metrics.service.js';

/**
 * Prometheus metrics for unique jobs (opt-in; needs `prom-client`). Import it next to `UniqueJobsModule.forRoot`:
 * `UniqueJobsMetricsModule.forRoot({ registry })`, then expose the registry as you already do (e.g. a `/metrics`
 * controller returning `await registry.metrics()`). See {@link UniqueJobsMetrics} for the metrics.
 */
@Module({})
export class UniqueJobsMetricsModule {
  /**
   * Registers the metrics in `options.registry` (default: prom-client's global `register`).
   *
   * @throws InvalidUniqueJobOptionsError when a `heldLocks` bound is invalid (at bootstrap).
   */
  static forRoot(options: UniqueJobsMetricsOptions = {}): DynamicModule {
    validateHeldLocks(options.heldLocks);
    return {
      module: UniqueJobsMetricsModule,
      providers: [{ provide: UNIQUE_JOBS_METRICS_OPTIONS, useValue: options }, UniqueJobsMetrics],
      exports: [UniqueJobsMetrics],
    };
  }
}

/** The held-locks gauge's bounds: positive integers (`maxScans` may be `Infinity`), a cache time ≥ 0. */
function validateHeldLocks(heldLocks: UniqueJobsMetricsOptions['heldLocks']): void {
  if (heldLocks === undefined || heldLocks === false) return;
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError('UniqueJobsMetricsModule.forRoot', `heldLocks.${option}`, problem);
  };
  const { scanCount, maxScans, cacheMs } = heldLocks;
  if (scanCount !== undefined && !(Number.isSafeInteger(scanCount) && scanCount >= 1)) {
    fail('scanCount', `must be a positive integer (got ${String(scanCount)})`);
  }
  if (maxScans !== undefined && maxScans !== Infinity && !(Number.isSafeInteger(maxScans) && maxScans >= 1)) {
    fail('maxScans', `must be a positive integer, or Infinity for no limit (got ${String(maxScans)})`);
  }
  if (cacheMs !== undefined && !(Number.isFinite(cacheMs) && cacheMs >= 0)) {
    fail('cacheMs', `must be a number of milliseconds ≥ 0 (got ${String(cacheMs)})`);
  }
}
