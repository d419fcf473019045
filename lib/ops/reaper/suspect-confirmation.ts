import { setTimeout as delay } from 'node:timers/promises';
import type { BulksInProgress } from '../../locks/bulks-in-progress.js';
import type { JobStatus } from './job-statuses.js';
import type { ReapedItem, ReapReport } from './reap-report.interface.js';
import type { ReaperPass } from './reaper-pass.js';

/** Suspects an application's reaper collects a run (it stops scanning there), and keeps back for the next run at most. */
export const MAX_SUSPECTS = 1000;

/** An orphan seen once: released only if it is still orphaned after the grace period. */
export interface Suspect {
  item: ReapedItem;
  /** The statuses of its job (one per queue it may live in), read again: released only when none is live. */
  statuses: () => Promise<JobStatus[]>;
  /** Releases it, given the statuses read again (none live). */
  release: (statuses: readonly JobStatus[]) => Promise<boolean>;
}

/** What a confirmation reports to its run. */
interface RunReporting {
  /** Counts and lists an item released. */
  record: (item: ReapedItem) => void;
  /** Counts a check that failed. */
  failed: (error: unknown) => void;
}

/**
 * The second look of the reaper's scheduled runs: after the grace period, each suspect is checked again and released
 * when still orphaned. A general-path enqueue lock may belong to a large `addBulk` that took its locks and has not
 * added its jobs yet ({@link BulksInProgress}): when a bulk was announced both after the suspects were found and after
 * the grace, such suspects are kept back and confirmed again at the next run (not only when the pass, which may span
 * many runs, finds them again).
 */
export class SuspectConfirmation {
  /** General-path suspects a large bulk kept from release (at most `maxKept`). */
  private readonly keptBack: Suspect[] = [];

  constructor(
    private readonly bulks: BulksInProgress,
    private readonly settings: {
      readonly grace: number;
      readonly batchSize: number;
      /** Suspects kept back at most (as many as a run collects: every one it defers is confirmed at the next). */
      readonly maxKept: number;
    },
  ) {}

  /**
   * Confirms the suspects a run found, with those kept back by the runs before it (but those found again). A grace cut
   * short by `stopping` (the application shuts down) releases nothing: a later run (this process's or another's) finds
   * the orphans again. Resolves whether the grace was waited out.
   */
  async confirm(
    found: readonly Suspect[],
    pass: ReaperPass,
    report: ReapReport,
    run: RunReporting,
    stopping?: AbortSignal,
  ): Promise<boolean> {
    const seen = new Set(found.map(suspectId));
    const suspects = [...found, ...this.keptBack.splice(0).filter((suspect) => !seen.has(suspectId(suspect)))];
    if (suspects.length === 0) return true;
    const before = suspects.some((suspect) => suspect.item.kind === 'enqueueLock') ? await this.readBulks() : [];
    const waited = await delay(this.settings.grace, true, { signal: stopping }).catch(() => false);
    if (!waited) return false;
    const after = before?.length === 0 ? [] : await this.readBulks();
    const bulkSpanned = !before || !after || before.some((token) => after.includes(token));
    pass.refreshQueues();
    for (let i = 0; i < suspects.length; i += this.settings.batchSize) {
      await Promise.all(
        suspects.slice(i, i + this.settings.batchSize).map(async (suspect) => {
          if (bulkSpanned && suspect.item.kind === 'enqueueLock') {
            report.deferred += 1;
            if (this.keptBack.length < this.settings.maxKept) this.keptBack.push(suspect);
            return;
          }
          try {
            const statuses = await suspect.statuses();
            if (!statuses.includes('live') && (await suspect.release(statuses))) run.record(suspect.item);
          } catch (error) {
            run.failed(error); // kept (a failed discovery of queues, a node away): the next pass looks again
          }
        }),
      );
    }
    return true;
  }

  /**
   * A dry run's answer, without the grace: what a scheduled run would release, but the general-path suspects while a
   * large bulk is announced now (it may be adding their jobs: a real run would keep them back if it spans the grace),
   * counted in `deferred` instead.
   */
  async preview(found: readonly Suspect[], report: ReapReport, record: (item: ReapedItem) => void): Promise<void> {
    const bulks = found.some((suspect) => suspect.item.kind === 'enqueueLock') ? await this.readBulks() : [];
    for (const suspect of found) {
      if ((!bulks || bulks.length > 0) && suspect.item.kind === 'enqueueLock') report.deferred += 1;
      else record(suspect.item);
    }
  }

  /**
   * The large bulks in progress; `undefined` when they cannot be read (then every bulk is taken to be still running:
   * the general-path suspects are kept back).
   */
  private readBulks(): Promise<string[] | undefined> {
    return this.bulks.current().then(
      (bulks) => bulks.map((bulk) => bulk.holder),
      () => undefined,
    );
  }
}

/** A suspect's identity: its key and owner. */
function suspectId({ item }: Suspect): string {
  return `${item.key}\n${item.jobId ?? ''}`;
}
