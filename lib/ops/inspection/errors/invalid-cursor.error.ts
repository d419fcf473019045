import { UniqueJobsError } from '../../../errors/unique-jobs.error.js';

/**
 * A paging cursor given back to {@link LockInspector.listLocks} is not one it returned, or was made over other
 * Redis Cluster masters than those there now.
 */
export class InvalidCursorError extends UniqueJobsError {
  constructor(cursor: string, reason?: string) {
    super(
      `Invalid cursor ${JSON.stringify(cursor.length > 80 ? `${cursor.slice(0, 80)}…` : cursor)}${reason ? ` (${reason})` : ''}: pass back a cursor a previous page returned, or "0" to start`,
    );
  }
}
