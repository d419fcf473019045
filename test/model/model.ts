// The model of one sequence: its lock configuration, the jobs the commands created (with the state each was in when the
// system last settled) and a readable log of the steps, for failure reports. The model does not guess how BullMQ moves
// jobs: after every step it reads the states the real system settled in, and the invariants (invariants.ts) judge the
// locks against those states with the promise table (promises.ts).
import { lockKey } from '../../lib/index.js';
import { jobNameOf, type LockConfig } from './configs.js';
import { DOCS_OVER_INVARIANTS, holdsEnqueueLock, locksAtEnqueue, PROMISES, type JobState } from './promises.js';
import { BULL_PREFIX, type DigestKeys, type JobSnapshot, type Run, type System } from './system.js';

/** How many digests a sequence plays with. */
export const DIGESTS = 3;

/** One job of the sequence (one incarnation of a job id: a removed job's id may be used again). */
export interface ModelJob {
  readonly id: string;
  readonly digest: number;
  /** The step that created it. */
  readonly step: number;
  state: JobState;
  /** BullMQ's attemptsStarted when last seen. */
  started: number;
  /** No handler ran it when last seen: no start, or every start one the `reschedule` strategy put back. */
  neverRan?: boolean;
  /** How it went away, once it did: removed by a command, replaced (strategy `replace`), or removed by BullMQ. */
  gone?: 'removed' | 'replaced' | 'auto';
  /**
   * For a job removed by hand on the general path: its slot was given back since (the documented gap is over): the
   * reaper ran, or it was removed one by one through the guarded queue (`job.remove()` releases at once).
   */
  reapedSinceGone?: boolean;
  /** Its last attempt ended with its handler moving it back (moveToDelayed + DelayedError): see DOCUMENTED_GAPS. */
  movedByHandler?: boolean;
  /** Its last attempt was a later step (after a `movedByHandler` one) that failed: its run-time lock may stay parked. */
  parkedForRetry?: boolean;
  /**
   * An attempt of it once ended with its handler moving it (a step): the library counts steps in the job's hash, never
   * reset (not by `job.retry()` either), so each later failure that is retried is a later step's.
   */
  stepped?: boolean;
  /** The reaper ran once the job was gone or finished (a run-time lock parked for it is released by then). */
  reapedAfterEnd?: boolean;
}

/** A violated invariant. */
export interface Violation {
  invariant: string;
  message: string;
}

export class Model {
  readonly jobs: ModelJob[] = [];
  readonly log: string[] = [];
  /** Violations that do not depend on the settled state (answers, refused retries), found during the step. */
  readonly found: Violation[] = [];
  step = 0;
  /** The step removed jobs by hand (remove, drain, clean, obliterate): jobs gone in it count as removed. */
  removing = false;
  /** The step removed jobs one by one through the guarded queue: their slots are given back in the same call. */
  releasing = false;
  private tagNo = 0;
  /** Events of `system.events` already read. */
  eventsRead = 0;
  /** Holders of each digest's enqueue-lock key when the system last settled. */
  lockHolders: string[][] = [];

  readonly name: string;
  readonly keys: readonly string[];
  readonly digestKeys: readonly DigestKeys[];

  constructor(
    readonly seq: number,
    readonly config: LockConfig,
    readonly system: System,
  ) {
    this.name = jobNameOf(config);
    const queue = system.queues[config.queue].name;
    this.keys = Array.from({ length: DIGESTS }, (_, d) => `s${seq}-d${d}`);
    this.digestKeys = this.keys.map((key) => {
      const input = { queue, name: this.name, lockArgs: key, picked: true, prefix: system.prefix };
      return {
        fast: lockKey({ ...input, queuePrefix: BULL_PREFIX, lockLimit: 1, lock: 'until_executed' }),
        queued: lockKey({ ...input, lockLimit: 2, lock: 'until_executed' }),
        expiring: lockKey({ ...input, lockLimit: 1, lock: 'until_expired' }),
        running: lockKey({ ...input, kind: 'runtime' }),
      };
    });
    this.eventsRead = system.events.length;
  }

  get limit(): number {
    return this.config.lockLimit;
  }

  get fastPath(): boolean {
    return this.config.lockLimit === 1 && this.config.lock !== 'until_expired';
  }

  get promise() {
    return PROMISES[this.config.lock];
  }

  newTag(): string {
    return `s${this.seq}t${++this.tagNo}`;
  }

  /** The current incarnation of a job id (the latest job created with it). */
  job(id: string): ModelJob | undefined {
    for (let i = this.jobs.length - 1; i >= 0; i--) if (this.jobs[i].id === id) return this.jobs[i];
    return undefined;
  }

  /** Current incarnations only. */
  current(): ModelJob[] {
    return this.jobs.filter((job) => this.job(job.id) === job);
  }

  add(id: string, digest: number): ModelJob {
    const job: ModelJob = { id, digest, step: this.step, state: 'waiting', started: 0 };
    this.jobs.push(job);
    return job;
  }

  /** Jobs of a digest that hold its enqueue lock by the promise table, in their last settled state. */
  holders(digest: number): ModelJob[] {
    const { heldIn } = this.promise;
    if (heldIn === 'period') {
      return this.jobs.filter((job) => job.digest === digest && job.gone !== 'replaced');
    }
    const holders = this.current().filter(
      (job) => job.digest === digest && holdsEnqueueLock(this.config.lock, job.state),
    );
    const actual = this.lockHolders[digest] ?? [];
    // A job its own handler moved back, whose lock another job took while it ran: it holds nothing until it starts
    // again (DOCUMENTED_GAPS.jobMovedByItsHandlerMayLoseItsLock).
    const unlocked = (job: ModelJob) => !actual.includes(job.id);
    const moved = holders.filter((job) => !(job.movedByHandler && job.started > 0 && unlocked(job)));
    if (!DOCS_OVER_INVARIANTS.retryWaitingJobMayLoseItsLock || heldIn.includes('active')) return moved;
    // The docs' reading: a job waiting for its retry (it started before) that found its lock taken when it failed holds
    // nothing until it runs again.
    return moved.filter((job) => !(job.state === 'delayed' && job.started > 0 && unlocked(job)));
  }

  /** General-path slots the docs let a removed job keep until the reaper runs. */
  gap(digest: number): ModelJob[] {
    if (this.fastPath || !locksAtEnqueue(this.config.lock)) return [];
    return this.jobs.filter((job) => job.digest === digest && job.gone === 'removed' && !job.reapedSinceGone);
  }

  /** Runs of this sequence held at their gate, whose job is active (what a `finish` or `stall` acts on). */
  blockedRuns(): Run[] {
    return this.system.runs.filter(
      (run) => run.seq === this.seq && run.status === 'blocked' && this.job(run.jobId)?.state === 'active',
    );
  }

  jobsIn(...states: JobState[]): ModelJob[] {
    return this.current().filter((job) => states.includes(job.state));
  }

  /** Reads the settled states into the model (after `system.settle`). */
  update(snapshot: Map<string, JobSnapshot>): void {
    const replaced = new Set<string>();
    for (const event of this.system.events.slice(this.eventsRead)) {
      if (event.type === 'replaced') replaced.add(event.replacedJobId);
    }
    this.eventsRead = this.system.events.length;
    for (const job of this.current()) {
      const seen = snapshot.get(job.id);
      if (!seen) continue;
      if (seen.state === 'unknown' && !job.gone) {
        job.gone = replaced.has(job.id) ? 'replaced' : this.removing ? 'removed' : 'auto';
        if (job.gone === 'removed' && this.releasing) job.reapedSinceGone = true;
      }
      job.state = seen.state;
      job.started = seen.started;
      job.neverRan = seen.neverRan;
    }
  }

  ids(): string[] {
    return [...new Set(this.current().map((job) => job.id))];
  }

  describeJobs(): string {
    return this.current()
      .map((job) => `${job.id}(d${job.digest}) ${job.state}${job.gone ? ` [${job.gone}]` : ''}`)
      .join(', ');
  }
}
