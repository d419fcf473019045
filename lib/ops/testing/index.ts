/**
 * `nestjs-unique-jobs/testing`: helpers to test applications that use unique jobs for real, against a test Redis.
 * @packageDocumentation
 */
export { UniqueJobsTesting } from './unique-jobs-testing.js';
export { resetLocks } from './reset-locks.js';
export type { ResetLocksOptions } from './reset-locks.js';
export { lockState, isLocked, expectLocked, expectNotLocked } from './lock-state.js';
export type { LockState, HeldLockState, QueueRef } from './lock-state.js';
export { wasDeduplicated } from './was-deduplicated.js';
export { waitForUniqueJobEvent } from './wait-for-unique-job-event.js';
export type { UniqueJobsEventSource } from './wait-for-unique-job-event.js';
export type { UniqueJobsTestTarget } from './testing-target.js';
