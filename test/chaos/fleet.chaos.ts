// Scenario 6: a fleet under every fault at once, at volume.
//
// Four worker processes serve seven lanes (a queue each) that mix the lock types, the conflict strategies at enqueue
// (`log` absorbs a duplicate, `reject` refuses it into the dead set) and the `@IdempotencyKey` stores: Redis and
// PostgreSQL in plain mode (the effect goes to a "provider" with `downstreamKey()`, as the docs prescribe for plain
// mode), PostgreSQL in transactional mode (the effect is a row of the claim's transaction). One lane (G) has a
// run-time lock and no `@IdempotencyKey`: there only the lock keeps two runs of one event apart, so a broken run-time
// lock shows as overlapping runs (on the other lanes the idempotency claim alone would prevent them). Each lane has
// its share of duplicates, from none to nine in ten deliveries, sent close together by different producers so that
// they meet a live key. Four producer processes send the plan. Throughout the run:
// - workers SIGKILLed from outside at random, and planned self-SIGKILLs before, during and after the effect;
// - producers SIGKILLed mid-enqueue (a new one sends the rest of the share again from its last acknowledged op);
// - SIGTERM to workers in the middle of a job (graceful stop, then a new worker);
// - Redis: CLIENT KILL of every connection, SCRIPT FLUSH, DEBUG SLEEP (slow Redis), SIGKILL + restart on its AOF;
// - PostgreSQL: pg_terminate_backend of a store connection in the middle of a transaction.
// Every dead worker is replaced. The orphan reaper runs in the workers.
//
// Invariants, zero tolerance, lane by lane, once the queues are idle and every worker was stopped (SIGTERM):
// - one effect per event on the lanes that promise it (`@IdempotencyKey`); on plain lanes every provider call is
//   recorded with its run: no two calls of one key from runs that overlapped, none from a run that started after the
//   run that completed the event (a repeated call follows a run killed or cut off before completing); on the lock-only
//   lane an effect per run, and at least one per event;
// - every job completed, or refused at enqueue into the dead set naming a completed job of the same event (none lost);
// - no two overlapping runs of one event where the lock forbids it;
// - no lock or claim left with the workers stopped (no reaper, no renewal), but a lease of a run killed by an injected
//   SIGKILL, and that only until its lease ends;
// - no lost lease or lock but during a long Redis outage; every library `error` event explained by an injected fault;
//   every worker stopped by SIGTERM exited cleanly, and none died by itself.
//
// CI runs it at a small figure (about 2,000 deliveries); `npm run test:chaos -- --full` (UNIQUE_JOBS_CHAOS_FULL=1)
// at its full figure: more than 10,000 deliveries. UNIQUE_JOBS_CHAOS_SEED replays a plan (the seed is in the report,
// with the crash plan: CRASH_PLAN=<its value> sets it again; the faults' timing is random).
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from '@jest/globals';
import { between, report } from './support/harness.js';
import { FleetRun, type FleetLaneSpec } from './support/fleet.js';

const FULL = process.env.UNIQUE_JOBS_CHAOS_FULL === '1';
const SEED = Number(process.env.UNIQUE_JOBS_CHAOS_SEED ?? between(1, 1_000_000));
/** Events per lane: full figure, divided by 10 in CI. */
const scale = (events: number) => (FULL ? events : Math.ceil(events / 10));
const LEASE_MS = 10_000;

const LANES: FleetLaneSpec[] = [
  { name: 'A', lock: 'until_executed', idem: 'pg-tx', events: scale(1500), copies: 1 },
  { name: 'B', lock: 'until_and_while_executing', idem: 'redis', events: scale(1200), copies: 2 },
  { name: 'C', lock: 'while_executing', idem: 'pg', events: scale(400), copies: 10 },
  { name: 'D', lock: 'until_executing', idem: 'redis', events: scale(700), copies: 4 },
  { name: 'E', lock: 'none', idem: 'pg-tx', events: scale(400), copies: 10 },
  { name: 'F', lock: 'until_executed', client: 'reject', idem: 'pg', events: scale(500), copies: 10 },
  // Lock-only: copies sent close together, each a job of its own (no enqueue lock), runs of 100 ms: without the
  // run-time lock they would meet.
  { name: 'G', lock: 'while_executing', idem: 'none', events: scale(300), copies: 5, workMs: 100 },
];
const CRASHES = FULL ? 24 : 3;
const POINTS = ['before', 'during', 'after'] as const;

/** `n` distinct run ids in [2, max], the crash points rotating. */
function crashPlan(n: number, max: number): string {
  const ids = new Set<number>();
  while (ids.size < n) ids.add(between(2, max));
  return [...ids].map((id, i) => `${id}:${POINTS[i % POINTS.length]}`).join(',');
}

/** `promise`, or a clear failure after `ms` (the test's own timeout would leave every process running). */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('chaos: a fleet of workers and producers under every fault, lock types and stores mixed', () => {
  it(
    `one effect per event, nothing lost, no overlap where a lock forbids it, no lock left (${FULL ? 'full' : 'CI'} figure, seed ${SEED})`,
    async () => {
      const events = LANES.reduce((n, lane) => n + lane.events, 0);
      const effectOnceEvents = LANES.filter((lane) => lane.idem !== 'none').reduce((n, lane) => n + lane.events, 0);
      const plannedCrashes = process.env.CRASH_PLAN ?? crashPlan(CRASHES, FULL ? Math.floor(events * 0.8) : events);
      const run = await FleetRun.create({
        scenario: FULL ? 'fleet-full' : 'fleet',
        lanes: LANES,
        workers: 4,
        producers: 4,
        seed: SEED,
        workerEnv: {
          CONCURRENCY: '2',
          WORK_MS: '20',
          // Spread over the run (a short CI run must not lose every worker at once at its start).
          CRASH_PLAN: plannedCrashes,
          RUNTIME_LEASE: String(LEASE_MS),
          IDEM_LEASE: String(LEASE_MS),
          RESCHEDULE_IN: '300',
          // A dead worker's jobs come back ≤ 12 s after the crash; a live worker renews every 5 s, so a 1 s DEBUG
          // SLEEP or a restart of Redis never makes BullMQ declare a running job stalled.
          LOCK_DURATION: '10000',
          STALLED_INTERVAL: '2000',
        },
        producerEnv: { IN_FLIGHT: '3' },
      });
      let stopMonitor = () => undefined as void;
      try {
        await Promise.all(Array.from({ length: 4 }, () => run.startWorker()));
        stopMonitor = run.monitor();
        const t0 = Date.now();
        await run.startProducers();

        // Workers: SIGKILL from outside, wherever they are.
        run.every(
          FULL ? 4000 : 3000,
          FULL ? 8000 : 6000,
          async () => {
            const live = run.liveWorkers();
            if (live.length < 2) return false;
            live[between(0, live.length - 1)].fixture.child.kill('SIGKILL');
            run.fault('SIGKILL worker (from outside)');
          },
          FULL ? 2 : 1,
        );
        // Workers: SIGTERM in the middle of a job (a run without an end in the ledger).
        run.every(
          FULL ? 6000 : 1000,
          FULL ? 10000 : 2000,
          async () => {
            // Runs are short: look for one in flight for up to 3 s.
            let busy: typeof run.workers = [];
            for (const until = Date.now() + 3000; busy.length === 0 && Date.now() < until; await sleep(20)) {
              const { rows } = await run.pool.query<{ worker: string }>(
                `SELECT DISTINCT worker FROM ${run.tables.ledger} WHERE ended_at IS NULL`,
              );
              busy = run.liveWorkers().filter((worker) => rows.some((row) => row.worker === worker.label));
            }
            if (busy.length === 0 || run.liveWorkers().length < 2) return false;
            run.terminate(busy[between(0, busy.length - 1)]);
            run.fault('SIGTERM worker mid-job');
          },
          1,
          FULL ? Infinity : 2,
        );
        // Producers: SIGKILL mid-enqueue, one that has sent between a tenth and nine tenths of its share (CI's
        // producers are done in a few seconds: they are watched closely).
        run.every(
          FULL ? 5000 : 150,
          FULL ? 9000 : 300,
          async () => {
            const live = run.liveProducers(0.1, 0.9);
            if (live.length === 0) return false;
            live[between(0, live.length - 1)].child.kill('SIGKILL');
            run.fault('SIGKILL producer mid-enqueue');
          },
          1,
          FULL ? Infinity : 2,
        );
        // Redis: every client connection killed.
        let killedConnections = 0;
        run.every(
          4000,
          8000,
          async () => {
            killedConnections += Number(await run.redis.admin.call('CLIENT', 'KILL', 'TYPE', 'normal'));
            run.fault('CLIENT KILL TYPE normal');
          },
          2,
        );
        // Redis: script cache flushed (every client meets NOSCRIPT and loads its scripts again).
        run.every(
          3000,
          6000,
          async () => {
            await run.redis.admin.script('FLUSH');
            run.fault('SCRIPT FLUSH');
          },
          2,
        );
        // Redis: slow (the server sleeps 1 s: every command in flight waits).
        run.every(
          8000,
          14000,
          async () => {
            await run.redis.admin.call('DEBUG', 'SLEEP', '1');
            run.fault('DEBUG SLEEP 1');
          },
          1,
        );
        // Redis: SIGKILL and restart on its AOF (fsynced before every reply).
        const downFor: number[] = [];
        run.every(
          FULL ? 25000 : 8000,
          FULL ? 45000 : 12000,
          async () => {
            downFor.push(await run.restartRedis());
            run.fault('Redis restart (SIGKILL, AOF reload)');
          },
          1,
          FULL ? 3 : 1,
        );
        // PostgreSQL: a store connection terminated in the middle of a transaction.
        const terminatedStates: Record<string, number> = {};
        run.every(
          1500,
          3000,
          async () => {
            const { rows } = await run.pool.query<{ state: string; terminated: boolean }>(
              `SELECT state, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
              WHERE pid = (SELECT pid FROM pg_stat_activity
                            WHERE application_name = $1 AND xact_start IS NOT NULL
                              AND state IN ('idle in transaction', 'active')
                            ORDER BY random() LIMIT 1)`,
              [run.storeApp],
            );
            if (!rows[0]?.terminated) return false;
            terminatedStates[rows[0].state] = (terminatedStates[rows[0].state] ?? 0) + 1;
            run.fault('pg_terminate_backend mid-transaction');
          },
          FULL ? 2 : 1,
        );

        await within(FULL ? 900_000 : 150_000, run.produced(), 'the producers did not send their whole plan');
        const productionMs = Date.now() - t0;
        // Faults go on while the workers drain the backlog, until little is left.
        const drainUntil = Date.now() + (FULL ? 900_000 : 150_000);
        while ((await run.backlog()) > 20 && Date.now() < drainUntil) await sleep(500);
        await run.stopFaults();
        await run.quiesce(FULL ? 600_000 : 120_000);
        const processingMs = Date.now() - t0;
        stopMonitor();
        // Every worker stopped (SIGTERM, no restart): the lock check below runs with no reaper and no lease renewal.
        await within(90_000, run.stopWorkers(), 'the workers did not stop on SIGTERM');

        const runs = await run.runs();
        const selfKills = Object.fromEntries(
          POINTS.map((point) => [point, runs.filter((r) => r.outcome === `killed:${point}`).length]),
        );
        for (const point of POINTS) run.fault(`SIGKILL ${point} the effect (planned)`, selfKills[point]);
        const counts = await run.eventCounts();
        const exits = run.workerExits();
        const figures = await run.figures(LEASE_MS);
        const incidents = await run.incidents(LEASE_MS);
        const throughput = {
          productionSeconds: Math.round(productionMs / 100) / 10,
          processingSeconds: Math.round(processingMs / 100) / 10,
          deliveriesPerSecond: Math.round(figures.deliveries / (processingMs / 1000)),
          enqueueCallsPerSecond: Math.round(figures.enqueueCalls / (productionMs / 1000)),
        };
        const full = {
          ...figures,
          seed: SEED,
          crashPlan: plannedCrashes,
          throughput,
          notes: {
            killedConnections,
            redisDownMs: downFor,
            terminatedBackends: terminatedStates,
            workerExits: exits,
            duplicateAnswers: run.duplicateAnswers,
            refusedAnswers: run.refusedAnswers,
            producerErrors: run.producerErrors,
            eventCounts: counts,
            lostLeases: incidents.lostLeases,
            errors: incidents.errors,
            reaped: incidents.reaped,
            logErrors: await run.eventSamples(['log:error', 'worker:error'], 10),
          },
        };
        report(full);
        process.stdout.write(
          `seed ${SEED}, CRASH_PLAN=${plannedCrashes}\n` +
            `${JSON.stringify({ lanes: figures.lanes, throughput, lingering: figures.lingering, incidents }, null, 1)}\n`,
        );

        expect(figures.problems).toEqual([]);
        // No worker process died by itself (an error the library let through would take it down).
        expect(exits.crashed).toEqual([]);
        // Every SIGTERM (mid-job, and the final stop) ended in a clean exit: active jobs finished, everything closed,
        // a stop that a Redis restart overlapped included (shutdownTimeout bounds the wait for Redis).
        expect(exits.sigtermUnclean).toEqual([]);
        expect(figures).toMatchObject({ duplicates: 0, lost: 0, overlaps: 0, stuckLocks: 0, unboundedLocks: [] });
        expect(figures.lanes.filter((lane) => lane.providerViolations > 0)).toEqual([]);
        // The lock-only lane ran every event (its overlap check had runs to compare).
        const lockOnly = figures.lanes.find((lane) => !lane.effectOnce)!;
        expect(lockOnly.handlerRuns).toBeGreaterThanOrEqual(lockOnly.events);
        expect(figures.effects).toBe(effectOnceEvents);
        // No lease or lock lost but during a long Redis outage (see FleetRun.incidents), no unexplained library error.
        expect(incidents.lostLeases.unexplained).toEqual([]);
        expect(incidents.errors.unexplained).toEqual([]);
        expect(run.gaveUp).toEqual([]);
        // Every kind of fault happened.
        const kinds = [
          'SIGKILL worker (from outside)',
          'SIGTERM worker mid-job',
          'SIGKILL producer mid-enqueue',
          'CLIENT KILL TYPE normal',
          'SCRIPT FLUSH',
          'DEBUG SLEEP 1',
          'Redis restart (SIGKILL, AOF reload)',
          'pg_terminate_backend mid-transaction',
        ];
        expect(kinds.filter((kind) => !(figures.faults[kind] >= 1))).toEqual([]);
        expect(selfKills.before + selfKills.during + selfKills.after).toBeGreaterThanOrEqual(1);
        if (FULL) {
          expect(figures.deliveries).toBeGreaterThanOrEqual(10_000);
          for (const point of POINTS) expect(selfKills[point]).toBeGreaterThanOrEqual(1);
        }
      } finally {
        stopMonitor();
        await run.close();
      }
    },
    FULL ? 3_000_000 : 480_000,
  );
});
