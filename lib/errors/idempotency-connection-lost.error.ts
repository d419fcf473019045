import { UniqueJobsError } from './unique-jobs.error.js';
import { asError } from './thrown.js';

/**
 * The database connection of a transactional-mode transaction dropped while it was open (a failover,
 * `pg_terminate_backend`, `idle_in_transaction_session_timeout`, a network cut). The database rolled the transaction
 * back when the connection ended: neither the handler's writes nor the completed record were committed. The attempt
 * fails with this error (the connection is discarded, the process keeps running) and BullMQ's retry runs the job again.
 * A connection lost at the claim transaction's `COMMIT`, or while its answer was on the way, may have committed: the
 * PostgreSQL stores then ask the database on another connection (waiting up to 10 s for a COMMIT still running), and
 * report the attempt done when it did; this error when it did not, or when they could not tell.
 */
export class IdempotencyConnectionLostError extends UniqueJobsError {
  constructor(
    /** The connection's own error (e.g. `terminating connection due to administrator command`). */
    override readonly cause: unknown,
    /** Scope of the key, when known. */
    readonly scope?: string,
    /** The idempotency key (as stored), when known. */
    readonly key?: string,
  ) {
    const what =
      key === undefined
        ? 'an idempotency transaction'
        : `the transaction of idempotency key "${key}" (scope "${scope}")`;
    super(
      `The database connection of ${what} was lost while it was open (${describe(cause)}): the database rolled it back, nothing of it was committed; the attempt fails and is retried`,
    );
  }
}

function describe(cause: unknown): string {
  return asError(cause).message;
}
