// The invariants of the model test, checked on the settled system after every step (checkState, checkRuns) and on each
// enqueue answer as it comes back (judgeAnswer):
//  1. never more holders than the lock allows, per digest (by the promise table, on BullMQ's real job states);
//  2. no overlapping runs where a run-time lock promises none (handler start and end on Redis server time);
//  3. no lock without a live owner (at any time on the fast path; on the general path once the reaper ran) and no lock
//     shorter-lived than the lock type promises;
//  4. every add is answered truthfully.
import { locksAtEnqueue, DOCS_OVER_INVARIANTS, DOCUMENTED_GAPS } from './promises.js';
import type { Model, ModelJob, Violation } from './model.js';
import type { LockSnapshot, Run } from './system.js';

const list = (ids: Iterable<string>) => `[${[...ids].join(', ')}]`;

function describe(m: Model, id: string): string {
  const job = m.job(id);
  if (!job) return `${id} (not a job of this sequence)`;
  return `${id} (d${job.digest}, ${job.gone ? `gone: ${job.gone}` : job.state})`;
}

/** The members of the digest's enqueue-lock key, and the keys that should not exist for this configuration. */
export function enqueueLockOf(m: Model, lock: LockSnapshot): { holders: string[]; stray: string[] } {
  const { fast, queued, expiring } = lock;
  const stray: string[] = [];
  const fastMembers = fast === null ? [] : [fast];
  if (!locksAtEnqueue(m.config.lock)) {
    if (fast !== null) stray.push(`the fast-path key = ${fast}`);
    if (queued.length) stray.push(`…:queued ${list(queued)}`);
    if (expiring.length) stray.push(`…:expiring ${list(expiring)}`);
    return { holders: [], stray };
  }
  if (m.config.lock === 'until_expired') {
    if (fast !== null) stray.push(`the fast-path key = ${fast}`);
    if (queued.length) stray.push(`…:queued ${list(queued)}`);
    return { holders: expiring, stray };
  }
  if (m.fastPath) {
    if (queued.length) stray.push(`…:queued ${list(queued)}`);
    if (expiring.length) stray.push(`…:expiring ${list(expiring)}`);
    return { holders: fastMembers, stray };
  }
  if (fast !== null) stray.push(`the fast-path key = ${fast}`);
  if (expiring.length) stray.push(`…:expiring ${list(expiring)}`);
  return { holders: queued, stray };
}

/** Runs of the sequence whose handler is running (held at its gate), by digest. */
function liveRuns(m: Model, digest: number): Run[] {
  return m.system.runs.filter((run) => run.seq === m.seq && run.key === m.keys[digest] && run.status === 'blocked');
}

/** Jobs whose latest run of this digest was killed: their run-time lease outlives the crash (docs, worker crash column). */
function killedLeases(m: Model, digest: number): Set<string> {
  const latest = new Map<string, Run>();
  if (!DOCUMENTED_GAPS.killedRunKeepsLeaseUntilItEnds) return new Set();
  for (const run of m.system.runs) {
    if (run.seq === m.seq && run.key === m.keys[digest]) latest.set(run.jobId, run);
  }
  return new Set([...latest].filter(([, run]) => run.status === 'killed').map(([id]) => id));
}

/** Invariants 1 and 3 (and the instant part of 2) on the settled states and lock keys. */
export function checkState(m: Model, locks: readonly LockSnapshot[]): Violation[] {
  const found: Violation[] = [];
  const { lock } = m.config;
  const limit = m.limit;
  for (let d = 0; d < locks.length; d++) {
    const snapshot = locks[d];
    const { holders: actual, stray } = enqueueLockOf(m, snapshot);
    if (stray.length) {
      found.push({
        invariant: '3',
        message: `d${d}: keys a ${lock} lock (lockLimit ${limit}) never uses: ${stray.join('; ')}`,
      });
    }
    if (locksAtEnqueue(lock)) {
      const promised = m.holders(d);
      const promisedIds = new Set(promised.map((job) => job.id));
      if (promised.length > limit) {
        found.push({
          invariant: '1',
          message: `d${d}: ${promised.length} jobs hold the ${lock} lock, lockLimit ${limit}: ${promised
            .map((job) => describe(m, job.id))
            .join(', ')}`,
        });
      }
      for (const id of promisedIds) {
        if (!actual.includes(id)) {
          found.push({
            invariant: '3',
            message: `d${d}: job ${describe(m, id)} holds the ${lock} lock by its promise, but the lock key does not name it (holders: ${list(actual)})`,
          });
        }
      }
      const allowed = new Set([...promisedIds, ...m.gap(d).map((job) => job.id)]);
      for (const id of actual) {
        if (!allowed.has(id)) {
          found.push({
            invariant: '3',
            message: `d${d}: the ${lock} lock is held by job ${describe(m, id)}, which does not hold it by the lock's promise${m.fastPath ? ' (fast path: no gap is documented)' : ' (general path, and not a removed job awaiting the reaper)'}`,
          });
        }
      }
      if (actual.length > limit) {
        found.push({ invariant: '1', message: `d${d}: the lock key has ${actual.length} holders ${list(actual)}` });
      }
      if (lock === 'until_expired' && actual.length > 0 && snapshot.expiringTtl <= 0) {
        found.push({
          invariant: '3',
          message: `d${d}: the until_expired key has no TTL (PTTL ${snapshot.expiringTtl})`,
        });
      }
    }
    const live = liveRuns(m, d);
    if (m.promise.runtime) {
      const liveIds = new Set(live.map((run) => run.jobId));
      if (live.length > limit) {
        found.push({
          invariant: '2',
          message: `d${d}: ${live.length} handlers run at once, lockLimit ${limit}: ${list(liveIds)}`,
        });
      }
      for (const id of liveIds) {
        if (!snapshot.running.includes(id)) {
          found.push({
            invariant: '3',
            message: `d${d}: the handler of job ${describe(m, id)} runs without its run-time lease (holders: ${list(snapshot.running)})`,
          });
        }
      }
      const killed = killedLeases(m, d);
      for (const id of snapshot.running) {
        // A step job parked by its handler (moveToDelayed + DelayedError) keeps its run-time lock for its next delivery;
        // removed or finished without it, until the reaper's next run.
        const parked = m.jobs.some(
          (job) =>
            job.id === id && job.digest === d && (job.movedByHandler || job.parkedForRetry) && !job.reapedAfterEnd,
        );
        if (parked) continue;
        if (!liveIds.has(id) && !killed.has(id)) {
          found.push({
            invariant: '3',
            message: `d${d}: the run-time lock is held by job ${describe(m, id)}, whose handler is not running`,
          });
        }
      }
    } else if (snapshot.running.length) {
      found.push({ invariant: '3', message: `d${d}: a ${lock} lock has a run-time key ${list(snapshot.running)}` });
    }
    for (const run of live) {
      const job = m.job(run.jobId);
      if (job?.state !== 'active' || m.system.lastRun(m.seq, run.jobId) !== run) {
        found.push({
          invariant: '2',
          message: `d${d}: a handler of job ${describe(m, run.jobId)} is still running, but it is not the job's current attempt`,
        });
      }
    }
  }
  return found;
}

/** Invariant 2: at most lockLimit handlers of a digest overlap in time (Redis server time; a killed run ends when killed). */
export function checkRuns(m: Model): Violation[] {
  if (!m.promise.runtime) return [];
  const found: Violation[] = [];
  for (let d = 0; d < m.keys.length; d++) {
    const runs = m.system.runs.filter((run) => run.seq === m.seq && run.key === m.keys[d] && run.start !== undefined);
    const edges = runs.flatMap((run) => [
      { at: run.start!, delta: 1, run },
      { at: run.end ?? Number.POSITIVE_INFINITY, delta: -1, run },
    ]);
    // Ends before starts at the same instant: touching runs do not overlap.
    edges.sort((a, b) => a.at - b.at || a.delta - b.delta);
    const open = new Set<Run>();
    for (const edge of edges) {
      if (edge.delta < 0) {
        open.delete(edge.run);
        continue;
      }
      open.add(edge.run);
      if (open.size > m.limit) {
        found.push({
          invariant: '2',
          message: `d${d}: ${open.size} handlers overlapped (lockLimit ${m.limit}): ${[...open]
            .map((run) => `job ${run.jobId} run ${run.no}`)
            .join(', ')}`,
        });
        break;
      }
    }
  }
  return found;
}

/** What one add answered, for {@link judgeAnswer}. */
export type Answer =
  | { status: 'enqueued'; jobId: string; reused?: boolean; delayed?: boolean }
  | { status: 'duplicate'; existingJobId: string | undefined; ownId?: boolean };

/**
 * The holders of each digest when the step began, and the jobs the step has accepted so far: `certain` ones still hold
 * the lock (a lock held while running, a period, a delayed job); a waiting job of a lock released at start may have
 * started (and let go) before the step's next enqueue was locked.
 */
export interface StepHolders {
  atStart: ModelJob[][];
  accepted: { id: string; certain: boolean }[][];
  replaced: Set<string>;
}

export function stepHolders(m: Model): StepHolders {
  return {
    atStart: m.keys.map((_, d) => m.holders(d)),
    accepted: m.keys.map(() => []),
    replaced: new Set(),
  };
}

/**
 * Invariant 4 on one answer: `enqueued` with a job that exists right after (and only if the lock had room), or
 * `duplicate` naming a job that holds the lock and exists (an `until_expired` holder may be gone: its period goes on).
 * `replacedYet`: the holders replaced when it was answered (an entry of a bulk: by the entries up to it), when not all
 * those of the step.
 */
export function judgeAnswer(
  m: Model,
  digest: number,
  answer: Answer,
  holders: StepHolders,
  exists: (id: string) => boolean,
  replacedYet: ReadonlySet<string> = holders.replaced,
): Violation[] {
  const found: Violation[] = [];
  const { lock } = m.config;
  const period = m.promise.heldIn === 'period';
  const before = holders.atStart[digest].map((job) => job.id).filter((id) => !replacedYet.has(id));
  const accepted = holders.accepted[digest].filter((a) => !replacedYet.has(a.id));
  const atAnswer = new Set([...before, ...accepted.map((a) => a.id)]);
  if (answer.status === 'enqueued') {
    // (A later entry of the same bulk may have replaced it: then it existed when it was answered.)
    if (!exists(answer.jobId) && !holders.replaced.has(answer.jobId)) {
      found.push({
        invariant: '4',
        message: `d${digest}: answered enqueued with job ${answer.jobId}, which does not exist`,
      });
    }
    if (!answer.reused && locksAtEnqueue(lock)) {
      const certain = new Set([...before, ...accepted.filter((a) => a.certain).map((a) => a.id)]);
      if (certain.size >= m.limit) {
        found.push({
          invariant: '1',
          message: `d${digest}: job ${answer.jobId} was accepted while ${list(certain)} held the ${lock} lock (lockLimit ${m.limit})`,
        });
      }
      const heldIn = m.promise.heldIn;
      holders.accepted[digest].push({
        id: answer.jobId,
        certain: heldIn === 'period' || heldIn.includes('active') || answer.delayed === true,
      });
    }
    return found;
  }
  const id = answer.existingJobId;
  if (id === undefined) {
    found.push({ invariant: '4', message: `d${digest}: answered duplicate without naming the holder` });
    return found;
  }
  // A job id reused within an until_expired period names the job that had it: the same job, a duplicate in its period.
  if (period && answer.ownId) return found;
  const gap = m.gap(digest).map((job) => job.id);
  const blocking = new Set([...atAnswer, ...gap]);
  if (!locksAtEnqueue(lock) || blocking.size < m.limit) {
    found.push({
      invariant: '4',
      message: `d${digest}: answered duplicate (holder ${describe(m, id)}) while the ${lock} lock had room: holders ${list(blocking)}, lockLimit ${m.limit}`,
    });
  }
  if (!blocking.has(id)) {
    found.push({
      invariant: '4',
      message: `d${digest}: the duplicate names job ${describe(m, id)}, which does not hold the lock (holders ${list(blocking)})`,
    });
  } else if (
    !period &&
    !exists(id) &&
    !holders.replaced.has(id) && // replaced by a later entry of the same bulk: it existed when it was named
    !(DOCS_OVER_INVARIANTS.duplicateMayNameRemovedHolder && gap.includes(id))
  ) {
    found.push({
      invariant: '4',
      message: `d${digest}: the duplicate names job ${describe(m, id)}, which does not exist`,
    });
  }
  // A holder from an earlier step that is still scheduled and never started can always be replaced (one accepted in
  // this step may have started by the time the strategy looked: a waiting job is picked at once).
  const holder = holders.atStart[digest].find((job) => job.id === id);
  if (
    m.config.client === 'replace' &&
    holder &&
    !replacedYet.has(id) &&
    holder.started === 0 &&
    holder.state === 'delayed'
  ) {
    found.push({
      invariant: '4',
      message: `d${digest}: replace fell back to a duplicate although the holder ${describe(m, id)} never started`,
    });
  }
  return found;
}
