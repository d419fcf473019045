/** Marks errors of this library that must extend another class (BullMQ's `UnrecoverableError`). */
export const UNIQUE_JOBS_ERROR = Symbol.for('nestjs-unique-jobs.error');

/**
 * Base class of every error this library throws, so callers can catch them all with one `instanceof`. The errors that
 * end a job without retries extend BullMQ's `UnrecoverableError` instead (that is how BullMQ recognises them) and are
 * still `instanceof UniqueJobsError`.
 */
export class UniqueJobsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    return (
      this === UniqueJobsError &&
      typeof value === 'object' &&
      value !== null &&
      (value as { [UNIQUE_JOBS_ERROR]?: boolean })[UNIQUE_JOBS_ERROR] === true
    );
  }
}
