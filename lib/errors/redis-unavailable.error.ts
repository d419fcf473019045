import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Thrown by an enqueue through the library (`queue.add` of a guarded queue, `UniqueJobsService.enqueue`) when the
 * queue's Redis connection is not ready within `enqueueTimeout`: nothing was sent, so nothing will be added later.
 */
export class RedisUnavailableError extends UniqueJobsError {
  constructor(
    /** The connection, as `host:port` (or the cluster's nodes). */
    readonly connection: string,
    /** How long the enqueue waited for it (ms). */
    readonly waitedMs: number,
    /** The last error the queue's connection reported (else another connection of the server), if any. */
    readonly lastError: string | undefined,
    /**
     * `true` when another connection of the application to the same server was ready when the enqueue gave up (and no
     * outage of that server was under way): the server answers, but this queue's connection had not reconnected yet
     * (after an outage, or after that connection alone dropped). Each connection reconnects on its own
     * `retryStrategy` schedule (BullMQ's default waits up to 20 s between attempts). `false` as well when that
     * connection's own last error was not a network one (a refused login of its own: see `lastError`).
     */
    readonly reachableElsewhere = false,
  ) {
    super(
      reachableElsewhere
        ? `Redis ${connection} is reachable (another connection of the application is ready), but the queue's connection is not connected yet (it retries on its own retryStrategy schedule): the enqueue waited ${waitedMs} ms for it and sent nothing${lastError ? ` (its last error: ${lastError})` : ''}`
        : `Redis ${connection} is not reachable: the enqueue waited ${waitedMs} ms for its connection and sent nothing${lastError ? ` (last error: ${lastError})` : ''}`,
    );
  }
}
