import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
} from './conflict-strategy.interface.js';

/**
 * At enqueue: removes the job holding the lock if it never started (waiting, delayed or prioritized, no attempt begun
 * but starts the `reschedule` strategy put back before the handler) and enqueues the new one in its place, with the
 * lock. A holder that is running, waiting for a retry, finished (an `until_expired` period), in another queue, the child
 * of a flow parent (removing it would let the parent run without it) or a flow parent (BullMQ's removal would take its
 * children with it) cannot be replaced, and `reject` applies: the new job is kept in the dead set, so its payload is
 * never lost. Nor is anything replaced when the new job's own `jobId` is what holds the lock (an `until_expired` period
 * or a lock across queues that outlived its job of that id): replacing another holder would not free it, so `reject`
 * names that id.
 */
export class ReplaceStrategy implements ConflictStrategy {
  readonly name = 'replace';
  readonly sides = ['client'] as const;

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    let current = conflict;
    for (let round = 0; round < 3; round++) {
      const replaced = await tools.replaceExisting(current);
      if (replaced) return { result: replaced };
      // Other producers may have replaced the holder meanwhile, or it gave the lock up as it started: name the live
      // holder in the fallback, or take the lock if it is free now.
      const live = await tools.holderOf(current);
      if (live !== undefined) {
        tools.logger.log(
          `Job ${live} cannot be replaced (it has started, has finished, or is not in queue "${conflict.definition.queue}"); falling back to reject`,
        );
        return tools.strategy('reject').onClientConflict!({ ...current, existingJobId: live }, tools);
      }
      current = { ...current, existingJobId: undefined };
    }
    return tools.strategy('reject').onClientConflict!(current, tools);
  }
}
