import { UniqueJobsError } from '../../../errors/unique-jobs.error.js';

/** A paging cursor given back to {@link LockInspector.listLocks} is not one it returned. */
export class InvalidCursorError extends UniqueJobsError {
  constructor(cursor: string) {
    super(
      `Invalid cursor ${JSON.stringify(cursor.length > 80 ? `${cursor.slice(0, 80)}…` : cursor)}: pass back a cursor a previous page returned, or "0" to start`,
    );
  }
}
