import { expectLocked, expectNotLocked, isLocked, lockState } from './lock-state.js';
import { resetLocks } from './reset-locks.js';
import { waitForUniqueJobEvent } from './wait-for-unique-job-event.js';
import { wasDeduplicated } from './was-deduplicated.js';

/**
 * Helpers to test an application that uses unique jobs, with uniqueness on, against a test Redis (see
 * docs/operations.md#testing-your-app). The same functions are exported one by one from `nestjs-unique-jobs/testing`.
 */
export const UniqueJobsTesting = {
  /** {@inheritDoc resetLocks} */
  resetLocks,
  /** {@inheritDoc lockState} */
  lockState,
  /** {@inheritDoc isLocked} */
  isLocked,
  /** {@inheritDoc expectLocked} */
  expectLocked,
  /** {@inheritDoc expectNotLocked} */
  expectNotLocked,
  /** {@inheritDoc wasDeduplicated} */
  wasDeduplicated,
  /** {@inheritDoc waitForUniqueJobEvent} */
  waitForEvent: waitForUniqueJobEvent,
} as const;
