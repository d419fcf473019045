import type { ConflictSide, LockType } from '../interfaces/unique-job-options.interface.js';
import type { LockRun } from './lock.js';
import { UntilExecutingLock } from './until-executing.lock.js';

/**
 * `until_executing` plus a run-time lock while the job runs: at most one queued and one running job per digest. The
 * run-time lock is taken first, so a job that meets a running duplicate keeps its place in line (its enqueue lock is
 * kept); by default it is rescheduled until the running one is done (a queued copy carries newer data: it must not
 * vanish). Failed attempts, the end and re-entry are `until_executing`'s.
 */
export class UntilAndWhileExecutingLock extends UntilExecutingLock {
  override readonly type: LockType = 'until_and_while_executing';
  override readonly conflictSides: readonly ConflictSide[] = ['client', 'server'];
  override readonly defaultStrategy = { client: 'log', server: 'reschedule' };
  override readonly takesRuntimeLock = true;

  /** Start: take the run-time lock, then release the enqueue lock (a conflict keeps it: the job stays in line). */
  override async start(run: LockRun) {
    const held = await run.takeRuntimeLock();
    if (held.acquired) await run.enqueueLock?.release();
    return held;
  }
}
