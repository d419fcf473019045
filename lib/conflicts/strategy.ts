import type { ClientConflict, ConflictTools, ServerConflict } from './conflict-strategy.interface.js';
import type { DuplicateResult } from '../interfaces/enqueue-result.interface.js';

/** Shared helpers of the built-in strategies. */

/** `duplicate job "settle" on queue "payments" (digest v1:…, locked by job 42)`. */
export function describeConflict(conflict: ClientConflict | ServerConflict): string {
  const name = conflict.side === 'client' ? conflict.name : conflict.job.name;
  return `duplicate job "${name}" on queue "${conflict.definition.queue}" (digest ${conflict.digest}, locked by job ${conflict.existingJobId ?? '(unknown)'})`;
}

/** The typed result of a duplicate at enqueue. */
export function duplicateResult(conflict: ClientConflict, strategy: string, deadSetEntryId?: string): DuplicateResult {
  return {
    status: 'duplicate',
    existingJobId: conflict.existingJobId,
    strategy,
    digest: conflict.digest,
    ...(deadSetEntryId === undefined ? {} : { deadSetEntryId }),
  };
}

/** Emits the `duplicate` event. */
export function emitDuplicate(conflict: ClientConflict | ServerConflict, tools: ConflictTools, strategy: string): void {
  tools.events.emit({
    type: 'duplicate',
    side: conflict.side,
    strategy,
    queue: conflict.definition.queue,
    jobName: conflict.side === 'client' ? conflict.name : conflict.job.name,
    digest: conflict.digest,
    existingJobId: conflict.existingJobId,
    ...(conflict.side === 'server' ? { jobId: conflict.job.id } : {}),
  });
}
