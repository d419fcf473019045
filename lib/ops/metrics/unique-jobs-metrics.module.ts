import { Module, type DynamicModule } from '@nestjs/common';
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
  /** Registers the metrics in `options.registry` (default: prom-client's global `register`). */
  static forRoot(options: UniqueJobsMetricsOptions = {}): DynamicModule {
    return {
      module: UniqueJobsMetricsModule,
      providers: [{ provide: UNIQUE_JOBS_METRICS_OPTIONS, useValue: options }, UniqueJobsMetrics],
      exports: [UniqueJobsMetrics],
    };
  }
}
