// Scenario 4: a lease expiring under a job that is still running (an event-loop stall: the worker busy-waits 4 s,
// four times its 1 s lease, so no renewal can be sent), while a second job of the same event reaches the other worker.
//
// What the library promises here is detection, not prevention (docs/how-locks-move.md, docs/idempotency.md): the
// stalled holder must report the lost lease (`lockLost` / `idempotencyLeaseLost` event and an error log line). What
// happens to the duplicate is recorded and asserted, so that docs/reliability.md can state it:
// - run-time lock (while_executing): the second job takes the lock once the lease has ended and runs while the
//   stalled one is still inside its handler: the two runs overlap;
// - @IdempotencyKey, Redis store (plain mode): the second delivery takes the key over once the lease has ended and
//   runs the effect again: two effects; the stalled holder's completion is refused (its result is not stored);
// - @IdempotencyKey, PostgreSQL store (transactional mode): the stalled holder's claim is part of its open
//   transaction (its advisory lock taken), so the second delivery waits in delayed until the holder commits, finds the
//   record completed and replays it: one effect, nothing lost.
import { describe, expect, it } from '@jest/globals';
import type { ChaosResult } from '../fixtures/chaos-worker.js';
import { waitFor } from '../support/wait.js';
import { ChaosRun, report, type ChaosIdempotency, type ChaosLock, type ChaosWorker } from './support/harness.js';

const LEASE_MS = 1000;
const STALL_MS = 4000;

/**
 * The rows of one event type, once at least one is there: a worker records its events in the background (one INSERT
 * each), so the row of an event emitted as the job ended can land after the queue is idle. None within 15 s: `[]`.
 */
async function recorded(run: ChaosRun, type: string) {
  return waitFor(`a recorded ${type} event`, async () => {
    const rows = await run.events([type]);
    return rows.length > 0 && rows;
  }).catch(() => run.events([type]));
}

/** A scenario's world: workers run one job at a time, with 1 s leases. */
function chaosRun(scenario: string, lock: ChaosLock, idem: ChaosIdempotency): Promise<ChaosRun> {
  return ChaosRun.create({
    scenario,
    lock,
    idem,
    restart: false,
    workerEnv: {
      CONCURRENCY: '1',
      WORK_MS: '50',
      PRINT_RUNS: '1',
      RUNTIME_LEASE: String(LEASE_MS),
      IDEM_LEASE: String(LEASE_MS),
      RESCHEDULE_IN: '100',
    },
  });
}

/**
 * Two workers; job A (`stallMs`) starts on one of them, which then blocks; job B of the same event is added and runs
 * on the other. Resolves the stalled worker, and both jobs' ids, final states and return values.
 */
async function stallUnderDuplicate(run: ChaosRun) {
  const workers = await run.startWorkers(2);
  const a = await run.queue.add('event', { key: 'K', stallMs: STALL_MS }, { attempts: 3 });
  const running = (worker: ChaosWorker) =>
    worker.fixture.waitFor((m) => (m.running as { jobId?: string } | undefined)?.jobId === a.id).then(() => worker);
  const attempts = workers.map(running);
  for (const attempt of attempts) attempt.catch(() => undefined); // the other worker never runs A
  const stalled = await Promise.race(attempts);
  run.fault(`event-loop stall (${STALL_MS} ms busy-wait, lease ${LEASE_MS} ms)`);
  const b = await run.queue.add('event', { key: 'K' }, { attempts: 3 });
  await run.quiesce(30_000);
  const [doneA, doneB] = await Promise.all([run.queue.getJob(a.id!), run.queue.getJob(b.id!)]);
  return {
    stalled,
    a: { id: a.id!, state: await doneA!.getState(), result: doneA!.returnvalue as ChaosResult },
    b: { id: b.id!, state: await doneB!.getState(), result: doneB!.returnvalue as ChaosResult },
  };
}

describe('chaos: a lease expiring under a running job (event-loop stall)', () => {
  it('run-time lock: the stalled holder reports lockLost and logs an error; the duplicate ran meanwhile (overlap)', async () => {
    const run = await chaosRun('lease-expiry-lock', 'while_executing', 'none');
    try {
      const { stalled, a, b } = await stallUnderDuplicate(run);
      const lost = await recorded(run, 'lockLost');
      const errors = await recorded(run, 'log:error');
      const runs = await run.runs();
      const overlaps = run.overlaps(runs);
      const figures = await run.figures(['K'], LEASE_MS, {
        detected: lost.length,
        errorLog: errors.map((e) => e.detail),
        expected: 'the duplicate runs once the lease has ended: one overlap, documented',
      });
      report(figures);

      expect([a.state, b.state]).toEqual(['completed', 'completed']);
      // Detection: in the stalled process, for the stalled job, with an error log line naming it.
      expect(lost).toEqual([expect.objectContaining({ worker: stalled.label, type: 'lockLost', jobId: a.id })]);
      expect(errors).toEqual([
        expect.objectContaining({
          worker: stalled.label,
          detail: expect.stringMatching(new RegExp(`Run-time lock of job ${a.id} .* was lost`)),
        }),
      ]);
      // What happened: B ran on the other worker while A was still inside its handler.
      expect(b.result.worker).not.toBe(stalled.label);
      expect(overlaps).toHaveLength(1);
      expect(overlaps[0]).toMatchObject({ first: { jobId: a.id }, second: { jobId: b.id } });
      // Nothing is left held.
      expect(figures.stuckLocks).toBe(0);
    } finally {
      await run.close();
    }
  });

  it('@IdempotencyKey, Redis store (plain mode): the stalled holder reports idempotencyLeaseLost; the takeover ran the effect again', async () => {
    const run = await chaosRun('lease-expiry-idempotency-redis', 'none', 'redis');
    try {
      const { stalled, a, b } = await stallUnderDuplicate(run);
      const lost = await recorded(run, 'idempotencyLeaseLost');
      const errors = await recorded(run, 'log:error');
      const claims = await run.events(['idempotencyClaimed']);
      const figures = await run.figures(['K'], LEASE_MS, {
        detected: lost.length,
        errorLog: errors.map((e) => e.detail),
        expected: 'plain mode: the takeover runs the effect again (2 effects), documented; use transactional mode',
      });
      report(figures);

      expect([a.state, b.state]).toEqual(['completed', 'completed']);
      // B took the key over on the other worker once A's lease had ended …
      expect(
        claims.map((c) => ({
          worker: c.worker,
          jobId: c.jobId,
          takeover: (c.detail as { takeover: boolean }).takeover,
        })),
      ).toEqual([
        { worker: stalled.label, jobId: a.id, takeover: false },
        { worker: b.result.worker, jobId: b.id, takeover: true },
      ]);
      expect(b.result.worker).not.toBe(stalled.label);
      // … so the effect happened twice (plain mode cannot undo A's), and A's completion was refused: detected.
      expect(figures.duplicates).toBe(1);
      expect(lost.length).toBeGreaterThanOrEqual(1);
      expect(lost.every((event) => event.worker === stalled.label && event.jobId === a.id)).toBe(true);
      expect(errors.length).toBeGreaterThanOrEqual(1);
      for (const error of errors) {
        expect(error).toMatchObject({
          worker: stalled.label,
          detail: expect.stringContaining(`Job ${a.id} lost its claim on idempotency key "K"`),
        });
      }
      // The record holds B's result, the one a later delivery replays.
      const replay = await run.queue.add('event', { key: 'K' });
      await run.quiesce(30_000);
      expect((await run.queue.getJob(replay.id!))?.returnvalue).toEqual(b.result);
      expect(figures.stuckLocks).toBe(0);
    } finally {
      await run.close();
    }
  });

  it('@IdempotencyKey, PostgreSQL store (transactional mode): the duplicate waits for the holder’s transaction and replays it: one effect', async () => {
    const run = await chaosRun('lease-expiry-idempotency-postgres', 'none', 'postgres');
    try {
      const { stalled, a, b } = await stallUnderDuplicate(run);
      const counts = await run.eventCounts();
      const replayed = await run.events(['idempotencyReplayed']);
      const figures = await run.figures(['K'], LEASE_MS, {
        leaseLost: counts.idempotencyLeaseLost ?? 0,
        expected: "the duplicate waits for the holder's transaction (in delayed), then replays: one effect",
      });
      report(figures);

      expect([a.state, b.state]).toEqual(['completed', 'completed']);
      expect(a.result.worker).toBe(stalled.label);
      // B did not run: it replayed A's result, after waiting for A's transaction.
      expect(b.result).toEqual(a.result);
      expect(replayed).toEqual([expect.objectContaining({ jobId: b.id, type: 'idempotencyReplayed' })]);
      expect(await run.runs()).toHaveLength(1);
      expect(figures).toMatchObject({ duplicates: 0, lost: 0, overlaps: 0, stuckLocks: 0, effects: 1 });
      // No lease in transactional mode (the claim is part of the transaction), so none is lost.
      expect(counts.idempotencyLeaseLost ?? 0).toBe(0);
    } finally {
      await run.close();
    }
  });
});
