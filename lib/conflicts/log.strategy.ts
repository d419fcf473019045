import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
  ServerConflict,
} from './conflict-strategy.interface.js';
import { describeConflict, duplicateResult, emitDuplicate } from './strategy.js';

/** The default: drop the duplicate with a warning naming queue, job name, digest and the existing job, and an event. */
export class LogStrategy implements ConflictStrategy {
  readonly name = 'log';
  readonly sides = ['client', 'server'] as const;

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    tools.logger.warn(`Skipping ${describeConflict(conflict)}`);
    emitDuplicate(conflict, tools, this.name);
    return { result: duplicateResult(conflict, this.name) };
  }

  async onServerConflict(conflict: ServerConflict, tools: ConflictTools): Promise<unknown> {
    tools.logger.warn(`Skipping ${describeConflict(conflict)}; job ${conflict.job.id} completes without running`);
    emitDuplicate(conflict, tools, this.name);
    return undefined;
  }
}
