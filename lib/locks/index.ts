import type { LockType } from '../interfaces/unique-job-options.interface.js';
import type { Lock } from './lock.js';
import { UntilAndWhileExecutingLock } from './until-and-while-executing.lock.js';
import { UntilExecutedLock } from './until-executed.lock.js';
import { UntilExecutingLock } from './until-executing.lock.js';
import { UntilExpiredLock } from './until-expired.lock.js';
import { WhileExecutingLock } from './while-executing.lock.js';

/** Lock type name → lock. */
export const LOCKS: Readonly<Record<LockType, Lock>> = {
  until_executing: new UntilExecutingLock(),
  until_executed: new UntilExecutedLock(),
  until_expired: new UntilExpiredLock(),
  while_executing: new WhileExecutingLock(),
  until_and_while_executing: new UntilAndWhileExecutingLock(),
};

export { Lock } from './lock.js';
