import type { UniqueJobDefaults } from '../interfaces/unique-job-options.interface.js';

/** The defaults of every per-job option (overridable in `forRoot({ defaults })`). */
export const DEFAULT_JOB_OPTIONS: Readonly<UniqueJobDefaults> = {
  onConflict: 'log',
  lockTtl: undefined,
  lockTimeout: 0,
  lockLimit: 1,
  runtimeLockLease: 30_000,
  rescheduleIn: 5_000,
  maxReschedules: 10,
};

export { DEFAULT_PREFIX } from '../redis/keys.js';

/** How long an enqueue waits for a Redis connection that is not ready (ms). */
export const DEFAULT_ENQUEUE_TIMEOUT = 10_000;

/** How long a shutdown waits for an unreachable Redis before it disconnects from it (ms). */
export const DEFAULT_SHUTDOWN_TIMEOUT = 5_000;

/** Lease of a general-path enqueue lock without `lockTtl` (a queued job does not renew it): 24 hours. */
export const DEFAULT_ENQUEUE_LEASE = 24 * 60 * 60 * 1000;

export { DEFAULT_DEAD_SET } from '../dead-set/dead-set-defaults.js';
