import { Lock } from './lock.js';

/**
 * Locked from enqueue until the job completes: no second job per digest while one is queued, running or waiting for a
 * retry. Released when the job completes or finally fails ("dies"), so a dead job never blocks its digest.
 */
export class UntilExecutedLock extends Lock {
  readonly type = 'until_executed';
  readonly locksAtEnqueue = true;
}
