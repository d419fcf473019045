import { UnrecoverableError } from 'bullmq';
import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
  ServerConflict,
} from './conflict-strategy.interface.js';
import { bullKeys } from '../redis/keys.js';
import { describeConflict, duplicateResult } from './strategy.js';

/**
 * Keeps the duplicate without running it: it lands in the dead set (payload, digest, existing job id, time), where it
 * can be listed, retried and deleted. In the worker the job also ends as failed (unrecoverable), naming the entry.
 */
export class RejectStrategy implements ConflictStrategy {
  readonly name = 'reject';
  readonly sides = ['client', 'server'] as const;

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    const reason = `Rejected ${describeConflict(conflict)}`;
    const deadSetEntryId = await tools.deadSet.add({
      queue: conflict.definition.queue,
      bullPrefix: bullKeys.prefixOf(conflict.queue),
      jobName: conflict.name,
      data: conflict.data,
      opts: conflict.opts,
      digest: conflict.digest,
      existingJobId: conflict.existingJobId,
      side: 'client',
      reason,
    });
    tools.logger.warn(`${reason}; kept in the dead set as ${deadSetEntryId}`);
    this.emit(conflict, tools, deadSetEntryId);
    return { result: duplicateResult(conflict, this.name, deadSetEntryId) };
  }

  async onServerConflict(conflict: ServerConflict, tools: ConflictTools): Promise<unknown> {
    const { job } = conflict;
    const reason = `Rejected ${describeConflict(conflict)}`;
    const { deduplication: _dedup, uniqueJobs: _marker, jobId: _id, ...opts } = job.opts as Record<string, unknown>;
    const deadSetEntryId = await tools.deadSet.add({
      queue: conflict.definition.queue,
      bullPrefix: job.prefix,
      jobName: job.name,
      data: job.data,
      opts,
      digest: conflict.digest,
      existingJobId: conflict.existingJobId,
      ...(job.id === undefined ? {} : { jobId: job.id }),
      side: 'server',
      reason,
    });
    tools.logger.warn(`${reason}; kept in the dead set as ${deadSetEntryId}`);
    this.emit(conflict, tools, deadSetEntryId);
    throw new UnrecoverableError(`${reason}; kept in the dead set as ${deadSetEntryId}`);
  }

  private emit(conflict: ClientConflict | ServerConflict, tools: ConflictTools, deadSetEntryId: string): void {
    tools.events.emit({
      type: 'rejected',
      side: conflict.side,
      queue: conflict.definition.queue,
      jobName: conflict.side === 'client' ? conflict.name : conflict.job.name,
      digest: conflict.digest,
      existingJobId: conflict.existingJobId,
      deadSetEntryId,
    });
  }
}
