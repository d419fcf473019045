import { Lock } from './lock.js';

/**
 * An enqueue lock released when the job starts, plus a run-time lock while it runs: at most one queued and one running
 * job per digest. The run-time lock is taken first, so a job that meets a running duplicate keeps its place in line;
 * by default it is rescheduled until the running one is done (a queued copy carries newer data: it must not vanish).
 */
export class UntilAndWhileExecutingLock extends Lock {
  readonly type = 'until_and_while_executing';
  readonly locksAtEnqueue = true;
  override readonly releaseEnqueueLock = 'on-start';
  override readonly relockOnRetry = true;
  override readonly locksWhileRunning = true;
  override readonly defaultStrategy = { client: 'log', server: 'reschedule' };
}
