// Scenario 2: graceful shutdown (SIGTERM) during long jobs.
//
// Three worker processes (while_executing lock, @IdempotencyKey on the Redis store in plain mode) run 1.5 s jobs, two
// at a time each; two producers enqueue 36 events each (so every event has two jobs: the second waits for the
// run-time lock or replays). Every 2–3 s a worker that is in the middle of a job gets SIGTERM: Nest closes, BullMQ
// waits for the active jobs, the process exits 0, and a new worker replaces it.
//
// Invariants: every run that was in flight at a SIGTERM finished normally in the process that got it (no job stalled
// or ran again), one effect per event, every job completed, no overlap, no lock or claim left.
import { describe, expect, it } from '@jest/globals';
import { ChaosRun, eventKeys, report, type ChaosWorker } from './support/harness.js';

describe('chaos: SIGTERM during long jobs', () => {
  it('in-flight jobs finish before the process exits: nothing stalls, runs again, or stays locked', async () => {
    const run = await ChaosRun.create({
      scenario: 'sigterm',
      lock: 'while_executing',
      idem: 'redis',
      workerEnv: { CONCURRENCY: '2', WORK_MS: '1500', RUNTIME_LEASE: '5000', IDEM_LEASE: '5000' },
    });
    const stopped: { worker: ChaosWorker; inFlight: string[]; closed: Promise<unknown> }[] = [];
    try {
      await run.startWorkers(3);
      run.every(2000, 3000, async () => {
        // A live worker with a run in flight (the ledger says which runs have not ended).
        const { rows } = await run.pool.query<{ worker: string; id: string }>(
          `SELECT worker, id::text FROM ${run.tables.ledger} WHERE ended_at IS NULL`,
        );
        const busy = run.liveWorkers().filter((worker) => rows.some((row) => row.worker === worker.label));
        if (busy.length === 0) return false;
        const worker = busy[Math.floor(Math.random() * busy.length)];
        const inFlight = rows.filter((row) => row.worker === worker.label).map((row) => row.id);
        const closed = worker.fixture.waitFor((m) => m.closed === true);
        closed.catch(() => undefined); // asserted below
        worker.fixture.child.kill('SIGTERM');
        run.fault('SIGTERM');
        stopped.push({ worker, inFlight, closed });
      });
      const keys = eventKeys('evt', 36);
      await run.produce(2, keys, { ROUNDS: '1', IN_FLIGHT: '1', PAUSE_MS: '150' });
      await run.quiesce(90_000);
      await run.stopFaults();
      run.stopRestarting();
      await Promise.all(stopped.map(({ worker }) => worker.fixture.exited));

      const runs = await run.runs();
      const runOf = new Map(runs.map((r) => [r.id, r]));
      const inFlightAtSigterm = stopped.flatMap(({ inFlight }) => inFlight);
      const completed = await run.queue.getJobs(['completed'], 0, -1);
      const stalled = completed.filter((job) => job.stalledCounter > 0).map((job) => job.id);
      const figures = await run.figures(keys, 5000, {
        runsInFlightAtSigterm: inFlightAtSigterm.length,
        stalledJobs: stalled.length,
      });
      report(figures);

      expect(stopped.length).toBeGreaterThanOrEqual(3);
      // Each stopped worker closed (its close steps ran to the end) and exited 0 …
      for (const { worker, closed } of stopped) {
        await expect(closed).resolves.toEqual({ closed: true });
        expect(worker.exit).toMatchObject({ code: 0, signal: null });
      }
      // … after the runs it had in flight had returned, in that process.
      expect(inFlightAtSigterm.length).toBeGreaterThanOrEqual(stopped.length);
      for (const id of inFlightAtSigterm) {
        expect(runOf.get(id)).toMatchObject({ outcome: 'returned', endedAt: expect.any(Number) });
      }
      // Nothing was interrupted: no run without an end, no job taken back by BullMQ's stall check, no takeover.
      expect(runs.filter((r) => r.outcome !== 'returned')).toEqual([]);
      expect(stalled).toEqual([]);
      expect(runs.filter((r) => r.takeover)).toEqual([]);
      expect(runs).toHaveLength(keys.length);
      expect(await run.failedJobs()).toEqual([]);
      expect(figures).toMatchObject({ duplicates: 0, lost: 0, overlaps: 0, stuckLocks: 0, lingeringLocks: 0 });
      expect(figures.effects).toBe(keys.length);
      expect(await run.deadSetSize()).toBe(0);
    } finally {
      await run.close();
    }
  });
});
