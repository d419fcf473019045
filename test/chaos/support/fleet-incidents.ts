// What the library reported during a fleet run (./fleet.ts), and how its worker processes ended, each checked against
// the faults the run injected: a lost lease or a library error is allowed only where an injected fault explains it.
import type { ChaosWorker } from './chaos-base.js';

/** A row of the run's events table, as {@link classifyIncidents} reads it. */
export interface IncidentRow {
  worker: string;
  type: string;
  job_id: string | null;
  detail: { kind?: string; error?: string; errorName?: string } | null;
  at: Date;
}

/** A Redis restart (SIGKILL + AOF reload): when the server was killed and when it answered again (ms). */
export interface RedisRestart {
  killedAt: number;
  upAt: number;
}

export interface Incidents {
  lostLeases: { allowed: unknown[]; unexplained: unknown[] };
  errors: { byFault: Record<string, number>; unexplained: unknown[] };
  reaped: { byKind: Record<string, number>; samples: unknown[] };
}

/**
 * Sorts what the library reported:
 * - lost leases (`lockLost`, `idempotencyLeaseLost`): none may happen, but one reported while Redis was down
 *   (SIGKILL + AOF restart) or within a lease after, when it was down for more than a third of a lease: the lease
 *   keeper renews every third of a lease and cannot while the server is away, so such an outage can end a lease (the
 *   documented limit: a lease is a promise about time). The overlap and provider-call checks still apply to such runs.
 * - library `error` events: each must be one a fault explains (a terminated PostgreSQL backend, a Redis connection
 *   killed or a server restarted or loading, a flushed script cache); `unexplained` must be empty.
 * - `reaped`: what the orphan reaper released (reported; the lock check runs with the reaper stopped).
 */
export function classifyIncidents(
  rows: IncidentRow[],
  faults: Record<string, number>,
  restarts: RedisRestart[],
  leaseMs: number,
): Incidents {
  const incidents: Incidents = {
    lostLeases: { allowed: [], unexplained: [] },
    errors: { byFault: {}, unexplained: [] },
    reaped: { byKind: {}, samples: [] },
  };
  const { lostLeases, errors, reaped } = incidents;
  for (const row of rows) {
    const at = row.at.getTime();
    const sample = {
      worker: row.worker,
      type: row.type,
      jobId: row.job_id,
      at: row.at.toISOString(),
      detail: row.detail,
    };
    if (row.type === 'reaped') {
      const kind = String(row.detail?.kind);
      reaped.byKind[kind] = (reaped.byKind[kind] ?? 0) + 1;
      if (reaped.samples.length < 10) reaped.samples.push(sample);
    } else if (row.type === 'error') {
      const fault = faultBehind(`${row.detail?.errorName ?? ''}: ${row.detail?.error ?? ''}`, faults);
      if (fault) errors.byFault[fault] = (errors.byFault[fault] ?? 0) + 1;
      else errors.unexplained.push(sample);
    } else {
      const outage = restarts.some(
        ({ killedAt, upAt }) => upAt - killedAt > leaseMs / 3 && at >= killedAt && at <= upAt + leaseMs,
      );
      (outage ? lostLeases.allowed : lostLeases.unexplained).push(sample);
    }
  }
  return incidents;
}

export interface WorkerExits {
  killed: number;
  sigtermClean: number;
  sigtermUnclean: string[];
  crashed: string[];
}

/**
 * How the worker processes ended: SIGKILLed (by the scenario or by themselves), stopped by SIGTERM (exit 0, or not:
 * with how the stop went), and `crashed`: exited on their own (no signal sent), with the end of their stderr (the
 * whole of it goes to `onCrash`).
 */
export function classifyExits(
  workers: readonly ChaosWorker[],
  sigterms: ReadonlyMap<string, { at: number; closedAt?: number }>,
  restarts: readonly RedisRestart[],
  onCrash: (worker: ChaosWorker, stderr: string) => void,
): WorkerExits {
  const exits: WorkerExits = {
    killed: 0,
    sigtermClean: 0,
    sigtermUnclean: [],
    crashed: [],
  };
  for (const worker of workers) {
    const exit = worker.exit;
    if (!exit) continue;
    // The end of its stderr: an uncaught error's message and stack are the last lines Node prints.
    const lines = exit.stderr.trim().split('\n');
    const tail = `${worker.label}: code ${exit.code}, signal ${exit.signal}: ${lines.slice(-25).join(' | ')}`;
    const sigterm = sigterms.get(worker.label);
    if (exit.signal === 'SIGKILL') exits.killed++;
    else if (worker.terminated && exit.code === 0) exits.sigtermClean++;
    else if (worker.terminated) {
      // How the stop went: close steps ended (then something kept the process alive) or not, and the Redis restarts
      // between the SIGTERM and the exit.
      const at = sigterm?.at ?? 0;
      const during = restarts
        .filter(({ killedAt, upAt }) => upAt >= at - 1_000 && killedAt <= exit.at)
        .map(({ killedAt, upAt }) => `Redis down ${killedAt - at} ms to ${upAt - at} ms after the SIGTERM`);
      const how =
        `[exit ${exit.at - at} ms after SIGTERM; close steps ` +
        `${sigterm?.closedAt === undefined ? 'never ended' : `ended after ${sigterm.closedAt - at} ms`}; ` +
        `${during.join(', ') || 'no Redis restart meanwhile'}]`;
      exits.sigtermUnclean.push(`${how} ${tail.slice(-1500)}`);
    } else {
      exits.crashed.push(tail.slice(-4000));
      onCrash(worker, exit.stderr);
    }
  }
  return exits;
}

/**
 * The injected fault a library `error` event's text (`<name>: <message>`) comes from, if one of those that happened
 * explains it: a PostgreSQL store connection terminated, a Redis connection killed or the server restarted (refused,
 * reset, closed, loading its AOF), the script cache flushed.
 */
function faultBehind(text: string, faults: Record<string, number>): string | undefined {
  const happened = (kind: string) => (faults[kind] ?? 0) > 0;
  if (
    happened('pg_terminate_backend mid-transaction') &&
    /terminating connection due to administrator command|Connection terminated|IdempotencyConnectionLost/i.test(text)
  ) {
    return 'pg_terminate_backend mid-transaction';
  }
  const redisDown = happened('CLIENT KILL TYPE normal') || happened('Redis restart (SIGKILL, AOF reload)');
  if (
    redisDown &&
    /ECONNRESET|ECONNREFUSED|EPIPE|Connection is closed|Stream isn't writeable|socket|LOADING/i.test(text)
  ) {
    return 'Redis connection killed or server restarted';
  }
  if (happened('SCRIPT FLUSH') && /NOSCRIPT/i.test(text)) return 'SCRIPT FLUSH';
  return undefined;
}
