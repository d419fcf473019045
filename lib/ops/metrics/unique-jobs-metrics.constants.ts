/** Injection token of the options of `UniqueJobsMetricsModule.forRoot`. */
export const UNIQUE_JOBS_METRICS_OPTIONS = Symbol('UNIQUE_JOBS_METRICS_OPTIONS');

/** Default prefix of the metric names. */
export const DEFAULT_METRICS_PREFIX = 'unique_jobs_';

/** Default buckets (seconds) of the run-time lock wait histogram. */
export const DEFAULT_LOCK_WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Default buckets (seconds) of the lock hold time histogram. */
export const DEFAULT_LOCK_HOLD_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400];
