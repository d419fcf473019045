// What the figures of one lane of the fleet scenario (./fleet.ts) are, and what in them breaks an invariant.
import type { Job } from 'bullmq';
import type { FleetWorkerLane } from '../../fixtures/chaos-fleet-worker.js';
import type { LedgerRun } from './chaos-base.js';

/** Whether a lane promises one effect per event (it has `@IdempotencyKey`); a lock-only lane promises no overlap. */
export function effectOnce(lane: Pick<FleetWorkerLane, 'idem'>): boolean {
  return lane.idem !== 'none';
}

/** Whether a lane's effect is a provider call with `downstreamKey()` (plain mode), recorded call by call. */
export function providerLane(lane: Pick<FleetWorkerLane, 'idem'>): boolean {
  return lane.idem === 'redis' || lane.idem === 'pg';
}

/** Two provider calls of one key that break the plain-mode promise, and why. */
export interface ProviderViolation {
  key: string;
  /** `overlap`: the two runs overlapped in time; `after completion`: the later run started after the run that
   * completed the event (whose result every later delivery must replay). */
  why: 'overlap' | 'after completion';
  first: LedgerRun;
  second: LedgerRun;
}

/** The runs that called the provider, key by key, in call order (calls of a run the ledger lost are left out). */
export function runsByKey(
  calls: readonly { key: string; run_id: string }[],
  runById: ReadonlyMap<string, LedgerRun>,
): Map<string, LedgerRun[]> {
  const byKey = new Map<string, LedgerRun[]>();
  for (const call of calls) {
    const run = runById.get(call.run_id);
    if (run) byKey.set(call.key, [...(byKey.get(call.key) ?? []), run]);
  }
  return byKey;
}

/**
 * A plain lane's provider calls, key by key (`byKey`): two runs that called it must never have overlapped (whatever the
 * lock: the claim forbids it), and none may have started after the run whose result completed the event (`completing`:
 * every later delivery replays that result). So each repeated call follows a run that ended without completing its
 * attempt (killed, or it threw, or it was cut off between its return and BullMQ's completion): `repeatedAfter` counts
 * them by how that run ended.
 */
export function providerCallChecks(
  byKey: Map<string, LedgerRun[]>,
  completing: ReadonlySet<string | undefined>,
  sigkilled: (run: LedgerRun) => boolean,
  overlaps: (runs: LedgerRun[]) => { first: LedgerRun; second: LedgerRun }[],
): { violations: ProviderViolation[]; repeatedAfter: Record<string, number> } {
  const violations: ProviderViolation[] = [];
  const repeatedAfter: Record<string, number> = {};
  for (const [key, list] of byKey) {
    for (const { first, second } of overlaps(list)) violations.push({ key, why: 'overlap', first, second });
    list.sort((a, b) => a.startedAt - b.startedAt);
    const done = list.find((run) => completing.has(run.id));
    for (const later of list) {
      if (done && later.startedAt > done.startedAt) {
        violations.push({ key, why: 'after completion', first: done, second: later });
      }
    }
    for (const previous of list.slice(0, -1)) {
      const how = previous.outcome?.startsWith('killed:')
        ? previous.outcome
        : previous.outcome?.startsWith('threw')
          ? 'threw'
          : previous.outcome === 'returned'
            ? 'returned, not completed'
            : sigkilled(previous)
              ? 'SIGKILLed'
              : 'no end';
      repeatedAfter[how] = (repeatedAfter[how] ?? 0) + 1;
    }
  }
  return { violations, repeatedAfter };
}

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
  /** Whether the lane promises one effect per event (else `effects` counts runs, and only overlaps are checked). */
  effectOnce: boolean;
  /** Plain lanes: provider calls beyond the first of a downstream key (re-runs after a crash, absorbed by the key). */
  repeatedProviderCalls: number;
  /** Plain lanes: how the run before each repeated provider call of its key ended (`killed:<point>`, `SIGKILLed`
   * (from outside), `threw`, `returned, not completed` (its attempt did not complete: killed or disconnected before
   * BullMQ recorded it)). */
  repeatedAfter: Record<string, number>;
  /** Plain lanes: repeated provider calls that break the promise (must be 0). */
  providerViolations: number;
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
  lane: FleetWorkerLane,
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
    providerViolations: ProviderViolation[];
  },
): string[] {
  const { missing, effects, duplicates, failed, notCompleted, orphanRefusals, overlaps, overlapForbidden } = found;
  const { providerViolations } = found;
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
  if (providerViolations.length) {
    problems.push(
      `lane ${lane.name}: provider called again by a run that should not have run: ${providerViolations
        .slice(0, 3)
        .map(
          ({ key, why, first, second }) =>
            `${key} (${why}): run ${first.id} (${first.worker}, ${first.outcome ?? 'no end'}) then ${second.id} (${second.worker})`,
        )
        .join('; ')}`,
    );
  }
  return problems;
}
