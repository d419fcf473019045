import { DuplicateJobError } from '../errors/duplicate-job.error.js';
import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
  ServerConflict,
} from './conflict-strategy.interface.js';
import { duplicateResult, emitDuplicate } from './strategy.js';

/**
 * At enqueue, `queue.add` throws {@link DuplicateJobError} carrying the existing job id (the explicit producer API
 * returns the duplicate result). In the worker, the attempt fails with it and BullMQ's retry takes over.
 */
export class RaiseStrategy implements ConflictStrategy {
  readonly name = 'raise';
  readonly sides = ['client', 'server'] as const;

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    emitDuplicate(conflict, tools, this.name);
    return {
      result: duplicateResult(conflict, this.name),
      error: new DuplicateJobError(conflict.definition.queue, conflict.name, conflict.digest, conflict.existingJobId),
    };
  }

  async onServerConflict(conflict: ServerConflict, tools: ConflictTools): Promise<unknown> {
    emitDuplicate(conflict, tools, this.name);
    throw new DuplicateJobError(conflict.definition.queue, conflict.job.name, conflict.digest, conflict.existingJobId);
  }
}
