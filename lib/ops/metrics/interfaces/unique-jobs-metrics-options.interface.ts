/**
 * The part of a `prom-client` `Registry` the metrics use (a structural type, so the library's types do not depend on
 * `prom-client`): pass `new Registry()` or prom-client's global `register`.
 */
export interface MetricsRegistry {
  /** Adds a metric to the registry (prom-client calls it for each metric created with `registers: [registry]`). */
  registerMetric(metric: never): void;
  /** Removes the metric of this full name (the module removes its own at shutdown). */
  removeSingleMetric(name: string): void;
  /** The registered metric of this full name, or `undefined`. */
  getSingleMetric(name: string): unknown;
}

/** Options of the held-locks gauge, counted with SCAN when Prometheus scrapes. */
export interface HeldLocksGaugeOptions {
  /** SCAN `COUNT`: keys Redis looks at per call. Default `1000`. */
  scanCount?: number;
  /**
   * Most SCAN calls one count makes (one pass over the library's lock keys and the queues' deduplication keys
   * together). When the key space is larger, the count stops there: the gauge is a lower bound and
   * `<prefix>held_locks_scan_complete` is `0`. Default `200`; `Infinity`: no limit.
   */
  maxScans?: number;
  /** A count is reused for this many ms, so frequent or parallel scrapes cost one scan. Default `10000`. */
  cacheMs?: number;
}

/** Options of `UniqueJobsMetricsModule.forRoot`. */
export interface UniqueJobsMetricsOptions {
  /** Where the metrics are registered. Default: prom-client's global `register`. */
  registry?: MetricsRegistry;
  /** Prefix of every metric name. Default `'unique_jobs_'`. */
  prefix?: string;
  /** Buckets (seconds) of the run-time lock wait histogram. */
  lockWaitBuckets?: number[];
  /** Buckets (seconds) of the lock hold time histogram. */
  lockHoldBuckets?: number[];
  /** The held-locks gauge (a bounded SCAN on scrape); `false` leaves it out. */
  heldLocks?: HeldLocksGaugeOptions | false;
}
