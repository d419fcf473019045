/** Options of {@link UniqueJobsHealthIndicator.isHealthy}. */
export interface UniqueJobsHealthOptions {
  /**
   * Most time the Redis checks may take together (ms) before the indicator reports `down`. Default `1000`; a value that
   * is not a number from 1 to 2^31 − 1 (what a timer takes) counts as the default.
   */
  timeout?: number;
  /** More dead-set entries than this makes the indicator `degraded` (still serving). Default: no threshold. */
  deadSetThreshold?: number;
  /**
   * The reaper's last run may be at most this old (ms) before the indicator reports `degraded`. Default: three reaper
   * intervals. Ignored when the reaper is not on a timer.
   */
  reaperMaxAge?: number;
}

/** `up`: all checks passed. `degraded`: serving, but the dead set is large or the reaper is late. `down`: failing. */
export type UniqueJobsHealthStatus = 'up' | 'degraded' | 'down';

/** What the reaper's last run was, as the health indicator reports it. */
export interface ReaperHealth {
  /** `'not configured'`: this application has no reaper; `'idle'`: not on a timer (`reaper.interval: false`). */
  state: 'ok' | 'late' | 'not run yet' | 'idle' | 'not configured';
  /** When its last run ended (ISO 8601). */
  lastRunAt?: string;
  /** Whether this process held the leadership in that run (only the leader works). */
  leader?: boolean;
  /** Whether that run finished a whole pass over the keys. */
  complete?: boolean;
}

/** The details of the indicator, under its key (terminus's `HealthIndicatorResult` shape). */
export interface UniqueJobsHealthDetails {
  /** The overall verdict: `down` when Redis fails, `degraded` for the dead set or the reaper, else `up`. */
  status: UniqueJobsHealthStatus;
  /** Whether the lock store (Redis) answered PING in time. */
  store: 'up' | 'down';
  /** PING round trip (ms). */
  latencyMs?: number;
  /** The library's Lua scripts: how many there are, and how many this check had to load (after a restart or flush). */
  scripts?: {
    /** How many Lua scripts the library uses. */
    total: number;
    /** How many were missing from Redis's script cache and loaded by this check. */
    loadedNow: number;
  };
  /** Rejected duplicates kept in the dead set. */
  deadSet?: number;
  /** The orphan reaper's last run, as this process saw it. */
  reaper: ReaperHealth;
  /** Why the indicator is not `up`. */
  message?: string;
}

/** The result of {@link UniqueJobsHealthIndicator.isHealthy}: the details under the key you chose. */
export type UniqueJobsHealthResult<Key extends string> = Record<Key, UniqueJobsHealthDetails>;
