// Scenario 1: workers SIGKILLed at random points of the handler, and restarted.
//
// Three worker processes (until_and_while_executing lock, @IdempotencyKey on the PostgreSQL store in transactional
// mode) and two producers that enqueue 100 events twice each. Nine handler runs drawn at random (by their place in
// the ledger's sequence, whichever process gets them) SIGKILL their own process, three before the effect, three
// during it and three after it (written, not yet committed); on top of that a random
// live worker is SIGKILLed from outside every 1–2 s, wherever it is (claiming, locking, committing, acknowledging).
// A dead worker is replaced at once. BullMQ gives the jobs of a dead worker back once their lock expires.
//
// Invariants at quiescence: one committed effect per event, every job completed, never two runs of one event at the
// same time, no lock or claim left.
import { describe, expect, it } from '@jest/globals';
import { between, ChaosRun, eventKeys, report } from './support/harness.js';

const POINTS = ['before', 'during', 'after'] as const;

/** `n` distinct run ids in [2, max], the crash points rotating: "17:before,4:during,…". */
function crashPlan(n: number, max: number): string {
  const ids = new Set<number>();
  while (ids.size < n) ids.add(between(2, max));
  return [...ids].map((id, i) => `${id}:${POINTS[i % POINTS.length]}`).join(',');
}

describe('chaos: workers SIGKILLed mid-handler and restarted', () => {
  it('every event has exactly one effect, no job is lost, runs never overlap, no lock is left', async () => {
    const run = await ChaosRun.create({
      scenario: 'sigkill',
      lock: 'until_and_while_executing',
      idem: 'postgres',
      workerEnv: {
        CONCURRENCY: '3',
        WORK_MS: '60',
        CRASH_PLAN: crashPlan(9, 95),
        RUNTIME_LEASE: '2000',
        IDEM_LEASE: '2000',
        // BullMQ gives a dead worker's job back ≤ 6 s after the crash; a live worker renews every 2.5 s.
        LOCK_DURATION: '5000',
        STALLED_INTERVAL: '1000',
      },
    });
    try {
      await run.startWorkers(3);
      run.every(
        1000,
        2000,
        async () => {
          const live = run.liveWorkers();
          if (live.length === 0) return false;
          live[Math.floor(Math.random() * live.length)].fixture.child.kill('SIGKILL');
          run.fault('SIGKILL from outside');
        },
        3,
      );
      const keys = eventKeys('evt', 100);
      const summaries = await run.produce(2, keys, { ROUNDS: '2', IN_FLIGHT: '2', PAUSE_MS: '90' });
      await run.stopFaults();
      await run.quiesce(90_000);
      run.stopRestarting();

      const runs = await run.runs();
      const selfKills = Object.fromEntries(
        POINTS.map((point) => [point, runs.filter((r) => r.outcome === `killed:${point}`).length]),
      );
      for (const point of POINTS) run.fault(`SIGKILL ${point} the effect`, selfKills[point]);
      const takeovers = runs.filter((r) => r.takeover).length;
      const figures = await run.figures(keys, 2000, { selfKills, takeovers });
      report(figures);

      // The planned crashes happened (each of the first 95 runs exists), but for one whose process a kill from outside
      // took first.
      for (const point of POINTS) expect(selfKills[point]).toBeGreaterThanOrEqual(1);
      expect(figures.faults['SIGKILL from outside']).toBeGreaterThanOrEqual(3);
      // Some crashed claims were taken over by the recovered job.
      expect(takeovers).toBeGreaterThanOrEqual(1);
      expect(summaries.flatMap((s) => s.gaveUp)).toEqual([]);
      expect(await run.failedJobs()).toEqual([]);
      expect(figures).toMatchObject({ duplicates: 0, lost: 0, overlaps: 0, stuckLocks: 0 });
      expect(figures.effects).toBe(keys.length);
      expect(await run.deadSetSize()).toBe(0);
    } finally {
      await run.close();
    }
  });
});
