import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
} from '../interfaces/conflict-strategy.interface.js';

/**
 * At enqueue: removes the job holding the lock if it has not started (waiting, delayed, prioritized) and enqueues the
 * new one in its place, with the lock. If the existing job is already running it cannot be replaced, and `reject`
 * applies: the new job is kept in the dead set, so its payload is never lost.
 */
export class ReplaceStrategy implements ConflictStrategy {
  readonly name = 'replace';
  readonly sides = ['client'] as const;

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    const replaced = await tools.replaceExisting(conflict);
    if (replaced) return { result: replaced };
    tools.logger.log(`Job ${conflict.existingJobId} is running and cannot be replaced; falling back to reject`);
    return tools.strategy('reject').onClientConflict!(conflict, tools);
  }
}
