import { describe, expect, it } from '@jest/globals';
import type { ReapReport } from '../../lib/index.js';
import { merge } from '../../lib/ops/cli/commands/reap.command.js';

function run(dryRun: boolean, deferred: number, startedAt: number): ReapReport {
  return {
    startedAt,
    durationMs: 10,
    dryRun,
    leader: true,
    complete: false,
    interrupted: false,
    scannedKeys: 100,
    failedKeys: 0,
    deferred,
    reaped: { enqueueLocks: 1, deduplicationKeys: 0, runtimeLeases: 0, idempotencyClaims: 0, sqlRecords: 0 },
    items: [],
  };
}

describe('unique-jobs reap: the runs of one pass as one report', () => {
  it('a dry pass of several runs counts every run’s deferred suspects (a dry run keeps none back for the next)', () => {
    const merged = merge(merge(run(true, 3, 0), run(true, 4, 100)), run(true, 5, 200));
    expect(merged.deferred).toBe(12);
    expect(merged.reaped.enqueueLocks).toBe(3);
  });

  it('a real pass reports the last run’s deferred (it re-checked those the run before kept back)', () => {
    expect(merge(run(false, 3, 0), run(false, 4, 100)).deferred).toBe(4);
  });
});
