// What the figures of one lane of the fleet scenario (./fleet.ts) are, and what in them breaks an invariant.
import type { Job } from 'bullmq';
import type { FleetLane } from '../../fixtures/chaos-fleet.js';
import type { LedgerRun } from './chaos-base.js';

/** The figures of one lane. */
export interface LaneFigures {
  lane: string;
  lock: string;
  client: string;
  idem: string;
  copies: number;
  events: number;
  jobs: number;
  deliveries: number;
  handlerRuns: number;
  effects: number;
  /** Plain lanes: provider calls beyond the first of a downstream key (re-runs after a crash, absorbed by the key). */
  repeatedProviderCalls: number;
  /** Duplicates refused at enqueue into the dead set (`client: 'reject'`). */
  refused: number;
  takeovers: number;
  duplicates: number;
  lost: number;
  overlaps: number;
  /** Whether the lane's lock forbids overlapping runs (only then is `overlaps` an invariant). */
  overlapForbidden: boolean;
}

/** What one lane's end state shows, as the lines of a failing test's message (none when every invariant holds). */
export function laneProblems(
  lane: FleetLane,
  found: {
    /** Events without an effect. */
    missing: string[];
    /** Event → its effects. */
    effects: Map<string, number>;
    /** Effects beyond the first of an event. */
    duplicates: number;
    failed: Job[];
    /** Jobs enqueued that did not complete (`<lane>/<job id>`). */
    notCompleted: string[];
    /** Refusals into the dead set without a completed holder of the event. */
    orphanRefusals: unknown[];
    overlaps: { key: string; first: LedgerRun; second: LedgerRun }[];
    overlapForbidden: boolean;
  },
): string[] {
  const { missing, effects, duplicates, failed, notCompleted, orphanRefusals, overlaps, overlapForbidden } = found;
  const problems: string[] = [];
  if (missing.length)
    problems.push(`lane ${lane.name}: ${missing.length} events without effect: ${missing.slice(0, 5).join(', ')}`);
  if (duplicates) {
    const twice = [...effects].filter(([, n]) => n > 1).map(([key, n]) => `${key}×${n}`);
    problems.push(`lane ${lane.name}: duplicate effects: ${twice.slice(0, 10).join(', ')}`);
  }
  if (failed.length) {
    problems.push(
      `lane ${lane.name}: ${failed.length} failed jobs: ${failed
        .slice(0, 5)
        .map((job) => `${job.id} ${(job.data as { key: string }).key}: ${job.failedReason}`)
        .join('; ')}`,
    );
  }
  if (notCompleted.length)
    problems.push(`lane ${lane.name}: enqueued, not completed: ${notCompleted.slice(0, 5).join(', ')}`);
  if (orphanRefusals.length) {
    problems.push(`lane ${lane.name}: ${orphanRefusals.length} refusals without a completed holder of the event`);
  }
  if (overlaps.length && overlapForbidden) {
    problems.push(
      `lane ${lane.name} (${lane.lock}): overlapping runs: ${overlaps
        .slice(0, 3)
        .map(
          ({ key, first, second }) => `${key}: run ${first.id} (${first.worker}) and ${second.id} (${second.worker})`,
        )
        .join('; ')}`,
    );
  }
  return problems;
}
