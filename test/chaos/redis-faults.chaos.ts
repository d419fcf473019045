// Scenario 3: Redis connections killed during load, Redis restarted during load, scripts flushed.
//
// Three worker processes (until_and_while_executing lock, @IdempotencyKey on the Redis store in plain mode: the locks
// and the claims live in the Redis that is being broken) and three producers that enqueue 90 events twice each. During
// the load, on the suite's own redis-server (AOF on, fsynced before every reply): `CLIENT KILL TYPE normal` every
// 1.2–2.4 s (every client connection of every process drops: clients reconnect and resend what was in flight),
// `SCRIPT FLUSH` every 0.8–1.5 s (the next EVALSHA of every library and BullMQ script answers NOSCRIPT, and the
// client must load the script again), and once, the server SIGKILLed and started again on its AOF.
//
// Invariants: one effect per event, every job completed, no overlap, no lock or claim left.
import { describe, expect, it } from '@jest/globals';
import { ChaosRun, eventKeys, report } from './support/harness.js';

describe('chaos: Redis connections killed, Redis restarted, scripts flushed', () => {
  it('every event has exactly one effect, no job is lost, runs never overlap, no lock is left', async () => {
    const run = await ChaosRun.create({
      scenario: 'redis-faults',
      appendonly: true,
      lock: 'until_and_while_executing',
      idem: 'redis',
      workerEnv: {
        CONCURRENCY: '3',
        WORK_MS: '40',
        RUNTIME_LEASE: '5000',
        IDEM_LEASE: '5000',
        LOCK_DURATION: '5000',
        STALLED_INTERVAL: '1000',
      },
    });
    try {
      await run.startWorkers(3);
      let killedConnections = 0;
      run.every(
        1200,
        2400,
        async () => {
          // SKIPME (the default) spares the admin connection itself.
          killedConnections += Number(await run.redis.admin.call('CLIENT', 'KILL', 'TYPE', 'normal'));
          run.fault('CLIENT KILL TYPE normal');
        },
        3,
      );
      run.every(
        800,
        1500,
        async () => {
          await run.redis.admin.script('FLUSH');
          run.fault('SCRIPT FLUSH');
        },
        3,
      );
      const downFor: number[] = [];
      run.every(
        2500,
        3500,
        async () => {
          if (downFor.length > 0) return false;
          downFor.push(await run.redis.restart());
          run.fault('Redis restart (SIGKILL, AOF reload)');
        },
        1,
      );
      const keys = eventKeys('evt', 90);
      const t0 = Date.now();
      const summaries = await run.produce(3, keys, { ROUNDS: '2', IN_FLIGHT: '2', PAUSE_MS: '50' });
      const productionMs = Date.now() - t0;
      await run.stopFaults();
      await run.quiesce(90_000);
      const drainMs = Date.now() - t0 - productionMs;
      run.stopRestarting();

      const errors = Object.fromEntries(summaries.flatMap((s) => Object.entries(s.errors)));
      const counts = await run.eventCounts();
      const figures = await run.figures(keys, 5000, {
        killedConnections,
        productionMs,
        drainMs,
        redisDownMs: downFor,
        producerErrors: errors,
        workerErrors: counts['worker:error'] ?? 0,
        libraryErrors: counts.error ?? 0,
        leaseLost: (counts.idempotencyLeaseLost ?? 0) + (counts.lockLost ?? 0),
        // What went wrong where, by message (BullMQ's worker errors are connection resets while a connection drops).
        errors: (await run.events(['worker:error', 'error', 'log:error'])).reduce<Record<string, number>>((all, e) => {
          const line = `${e.type}: ${JSON.stringify(e.detail)}`;
          all[line] = (all[line] ?? 0) + 1;
          return all;
        }, {}),
        // Deliveries delayed because their key was held by their own job (a live claim of an earlier attempt).
        selfConflicts: (await run.events(['idempotencyInProgress'])).filter(
          (event) => (event.detail as { holderJobId?: string }).holderJobId === event.jobId,
        ).length,
        takeovers: (await run.runs()).filter((r) => r.takeover).length,
      });
      report(figures);

      expect(downFor).toHaveLength(1);
      expect(figures.faults['CLIENT KILL TYPE normal']).toBeGreaterThanOrEqual(3);
      expect(figures.faults['SCRIPT FLUSH']).toBeGreaterThanOrEqual(3);
      expect(killedConnections).toBeGreaterThan(0);
      expect(summaries.flatMap((s) => s.gaveUp)).toEqual([]);
      expect(await run.failedJobs()).toEqual([]);
      expect(figures).toMatchObject({ duplicates: 0, lost: 0, overlaps: 0, stuckLocks: 0 });
      expect(figures.effects).toBe(keys.length);
      expect(await run.deadSetSize()).toBe(0);
      // No outage lasted a lease (5 s), so no lease was lost, and none was reported lost: a completion or a claim that
      // the client sent again after a dropped connection (already applied) is recognised as its own.
      expect(figures.notes?.leaseLost).toBe(0);
    } finally {
      await run.close();
    }
  });
});
