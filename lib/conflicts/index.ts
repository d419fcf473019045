import type { ConflictStrategy } from './conflict-strategy.interface.js';
import { LogStrategy } from './log.strategy.js';
import { RaiseStrategy } from './raise.strategy.js';
import { RejectStrategy } from './reject.strategy.js';
import { ReplaceStrategy } from './replace.strategy.js';
import { RescheduleStrategy } from './reschedule.strategy.js';

/** The built-in strategies plus the custom ones, by name (a custom strategy may not reuse a built-in name). */
export function strategyRegistry(custom: readonly ConflictStrategy[] = []): ReadonlyMap<string, ConflictStrategy> {
  const registry = new Map<string, ConflictStrategy>(
    [new LogStrategy(), new RaiseStrategy(), new RejectStrategy(), new ReplaceStrategy(), new RescheduleStrategy()].map(
      (strategy) => [strategy.name, strategy],
    ),
  );
  for (const strategy of custom) {
    if (registry.has(strategy.name)) {
      throw new Error(`A conflict strategy named "${strategy.name}" is already registered`);
    }
    registry.set(strategy.name, strategy);
  }
  return registry;
}
