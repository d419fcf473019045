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
    /** The last error the connection reported, if any. */
    readonly lastError: string | undefined,
  ) {
    super(
      `Redis ${connection} is not reachable: the enqueue waited ${waitedMs} ms for its connection and sent nothing${lastError ? ` (last error: ${lastError})` : ''}`,
    );
  }
}
