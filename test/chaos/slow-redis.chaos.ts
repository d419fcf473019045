// Scenario 5: slow Redis (DEBUG SLEEP) and client timeouts.
//
// Three worker processes (while_executing lock, @IdempotencyKey on the Redis store in plain mode; the library's own
// connection has a 1 s commandTimeout) and two producers (their connection has a 0.5 s commandTimeout) that enqueue
// 60 events twice each. During the load the suite's redis-server is frozen with `DEBUG SLEEP 1.5` every 2–3 s:
// every command in flight waits, a command whose client gives up first fails with ioredis' "Command timed out" (and is
// still executed once the server wakes up: a timed-out enqueue may have enqueued, a timed-out claim may have claimed).
// Producers retry failed adds; BullMQ retries failed attempts.
//
// Invariants: one handler run and one effect per event (no double run), every job completed, no overlap, no lock or
// claim left; and every error anyone saw is a timeout that says so.
import { describe, expect, it } from '@jest/globals';
import { ChaosRun, eventKeys, report } from './support/harness.js';

const SLEEP_S = 1.5;
const LEASE_MS = 8000;

describe('chaos: slow Redis (DEBUG SLEEP) and command timeouts', () => {
  it('no event runs twice, no job is lost, no lock is left, and the errors are clear timeouts', async () => {
    const run = await ChaosRun.create({
      scenario: 'slow-redis',
      lock: 'while_executing',
      idem: 'redis',
      workerEnv: {
        CONCURRENCY: '3',
        WORK_MS: '40',
        RUNTIME_LEASE: String(LEASE_MS),
        IDEM_LEASE: String(LEASE_MS),
        LOCK_COMMAND_TIMEOUT: '1000',
      },
    });
    try {
      await run.startWorkers(3);
      const keys = eventKeys('evt', 60);
      // The faults start once the producers are up: a Redis that sleeps while a producer boots can fail BullMQ's own
      // connection set-up under a 0.5 s commandTimeout (its queue.waitUntilReady() rejects with "Command timed out"
      // or waits for a quiet second that does not come), before the library takes any part.
      const summaries = await run.produce(
        2,
        keys,
        { ROUNDS: '2', IN_FLIGHT: '2', PAUSE_MS: '100', ADD_TIMEOUT: '500' },
        () =>
          run.every(
            2000,
            3000,
            async () => {
              await run.redis.admin.call('DEBUG', 'SLEEP', String(SLEEP_S));
              run.fault(`DEBUG SLEEP ${SLEEP_S}`);
            },
            3,
          ),
      );
      await run.stopFaults();
      await run.quiesce(90_000);
      run.stopRestarting();

      const producerErrors: Record<string, number> = {};
      for (const summary of summaries) {
        for (const [message, n] of Object.entries(summary.errors)) {
          producerErrors[message] = (producerErrors[message] ?? 0) + n;
        }
      }
      // What the workers saw: the library's error events and log lines, BullMQ worker errors, and the reasons of the
      // attempts that failed (kept on each completed job as its stacktrace).
      const workerErrors = (await run.events(['error', 'log:error', 'worker:error'])).map((event) =>
        event.type === 'error' ? (event.detail as { error: string }).error : String(event.detail),
      );
      const completed = await run.queue.getJobs(['completed'], 0, -1);
      const failedAttempts = completed.flatMap((job) => (job.stacktrace ?? []).map((trace) => trace.split('\n')[0]));
      const runs = await run.runs();
      const figures = await run.figures(keys, LEASE_MS, {
        producerErrors,
        workerErrors: count(workerErrors),
        failedAttempts: count(failedAttempts),
      });
      report(figures);

      expect(figures.faults[`DEBUG SLEEP ${SLEEP_S}`]).toBeGreaterThanOrEqual(3);
      // The timeouts were real: producers saw them (and retried).
      expect(Object.keys(producerErrors).length).toBeGreaterThan(0);
      // Every error is a timeout that says so.
      for (const message of [...Object.keys(producerErrors), ...workerErrors, ...failedAttempts]) {
        expect(message).toMatch(/Command timed out/);
      }
      expect(summaries.flatMap((s) => s.gaveUp)).toEqual([]);
      // No double run, not only no double effect.
      expect(runs).toHaveLength(keys.length);
      expect(await run.failedJobs()).toEqual([]);
      expect(figures).toMatchObject({ duplicates: 0, lost: 0, overlaps: 0, stuckLocks: 0 });
      expect(figures.effects).toBe(keys.length);
      expect(await run.deadSetSize()).toBe(0);
    } finally {
      await run.close();
    }
  });
});

/** Occurrences of each message. */
function count(messages: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const message of messages) counts[message] = (counts[message] ?? 0) + 1;
  return counts;
}
