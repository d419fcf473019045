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

/** Default key prefix. */
export const DEFAULT_PREFIX = 'uniquejobs';

/** Lease of a general-path enqueue lock without `lockTtl` (a queued job does not renew it): 24 hours. */
export const DEFAULT_ENQUEUE_LEASE = 24 * 60 * 60 * 1000;
