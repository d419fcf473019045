import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { isRestart } from '../common/bullmq-lifecycle.js';
import type { LoggerLike } from '../common/logger.js';
import type { OperationTracer } from '../common/operation-tracer.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { BoundEnqueueLock } from '../locks/bound-enqueue-lock.js';
import type { LockRun } from '../locks/lock.js';
import { lockedAs, type LockedBy } from '../locks/locked-digest.js';
import type { AcquireResult, LockStore } from '../locks/lock-store.js';
import { RuntimeLease } from '../locks/runtime-lease.js';
import { parkedLeaseMs, stallRecoveryMs, stepParkedMs, wholeDelay } from '../common/bullmq-lifecycle.js';
import type { JobDefinition } from '../options/job-definitions.js';
import type { UniqueJobsKeys } from '../redis/keys.js';
import { QueueRegistry } from '../redis/queue-registry.js';
import { parseRuntimeLockOwner } from '../redis/runtime-lock-owner.js';
import { knownOnSameServer, onSameServer } from '../redis/same-server.js';
import { SlotParking } from './slot-parking.js';
import { freeStaleParked } from './stale-parked-slots.js';
import type { WorkerConnectionRef } from './worker-connection.js';

/** What a run needs from the worker side. */
export interface JobRunDeps {
  readonly store: LockStore;
  readonly keys: UniqueJobsKeys;
  readonly events: UniqueJobsEvents;
  readonly logger: LoggerLike;
  readonly tracer: OperationTracer;
  /** The client the library's scripts run on (to know whether the worker's connection reaches the same server). */
  readonly client: Parameters<typeof knownOnSameServer>[0];
  /** Reports a bookkeeping failure that must not change the job's outcome. */
  reportError(job: Job<unknown, unknown>, digest: string, error: unknown): void;
}

/**
 * One job under its lock, from its start to BullMQ's record of its end: what a lock type's hooks act on (its enqueue
 * lock, bound to it; its run-time lock, given back after each attempt, kept across the steps of a step job), with the
 * events of each transition.
 */
export class JobRun implements LockRun {
  readonly enqueueLock: BoundEnqueueLock | undefined;
  readonly restarted: boolean;
  /**
   * Set when the handler moved its own job and ended the attempt (a step of a step job: see `isStepMove`): how long its
   * worker may take to recover the job as stalled, should the handler not have moved it (`stallRecoveryMs`).
   */
  stepped: { recoveryMs: number } | undefined;
  private runtime: RuntimeLease | undefined;
  /** The run-time lock asked for last (held or not): an acquire of it may have failed without an answer. */
  private asked: RuntimeLease | undefined;
  /** The run-time lock slot between a step job's deliveries. */
  private readonly parking: SlotParking;

  constructor(
    readonly job: Job<unknown, unknown>,
    readonly definition: JobDefinition,
    readonly digest: string,
    /** The kind of enqueue lock the job took at enqueue (its digest came from that lock); `undefined`: none. */
    lockedBy: LockedBy | undefined,
    private readonly deps: JobRunDeps,
    /** The connection the worker records the job's end on. */
    private readonly connection?: WorkerConnectionRef,
    /**
     * The job's abort signal (BullMQ's `worker.cancelJob`) and its worker's closing one: end a wait for the run-time
     * lock.
     */
    private readonly signals: readonly AbortSignal[] = [],
  ) {
    this.restarted = isRestart(job);
    this.parking = new SlotParking(job, definition, digest, lockedBy === undefined, deps.store, deps.keys);
    const lock = lockedBy && definition.enqueueLockOf(lockedBy); // the kind it took, were the options changed since
    this.enqueueLock = lock
      ? new BoundEnqueueLock(
          lock,
          { job, digest },
          {
            released: () => this.emitUnlocked('enqueue', job.timestamp),
            error: (error) => deps.reportError(job, digest, error),
          },
          { inOrder: () => this.inOrderOn(), onSameServer: () => this.onSameServer() },
          true,
        )
      : undefined;
  }

  /** {@link LockRun.stillRuns}: BullMQ's job lock still holds the token this worker took the job with. */
  async stillRuns(): Promise<boolean> {
    const { job } = this;
    return job.token === undefined || this.deps.store.jobs.holdsLock(job.queueQualifiedName, job.id!, job.token);
  }

  /** Takes the run-time lock (waiting up to `lockTimeout`); a refusal names the holder's job id. */
  async takeRuntimeLock(): Promise<AcquireResult> {
    const { job, definition, digest, deps } = this;
    const { owner, former } = this.parking.owners();
    const lease = new RuntimeLease(
      deps.store,
      deps.keys.runtimeLock(digest),
      owner,
      definition.options,
      {
        lost: () => {
          deps.logger.error(
            `Run-time lock of job ${job.id} (queue "${job.queueName}", digest ${digest}) was lost: its lease ended before it was renewed, so a duplicate may run concurrently`,
          );
          deps.events.emit({ type: 'lockLost', queue: job.queueName, jobName: job.name, digest, jobId: job.id! });
        },
        error: (error) => deps.reportError(job, digest, error),
        // A look-up or give-back that fails (a job's hash out of reach) is reported, not thrown: the refusal stands
        // unless another stale slot was given back.
        freeStale: (parked) =>
          freeStaleParked(
            deps.store,
            deps.events,
            job,
            { key: deps.keys.runtimeLock(digest), digest },
            parked,
            (error) => deps.reportError(job, digest, error),
            () => QueueRegistry.read(deps.client, deps.keys),
          ),
      },
      former,
    );
    this.asked = lease;
    const waitFrom = Date.now();
    const held = await deps.tracer.run(
      'runtimeLock',
      { queue: job.queueName, jobName: job.name, digest },
      async (annotate) => {
        // Asked again when its answer was read after its lease could have ended (an event-loop stall): the handler does
        // not start on a lease another job took over meanwhile.
        const answer = await lease.takeFresh(this.signals);
        annotate({ acquired: answer.acquired });
        return answer;
      },
    );
    if (!held.acquired) {
      // Its own slot refuses it only when closed off under an earlier run of this job (see AcquireResult.closedOff).
      const closedOff = held.holder === owner;
      const holder = held.holder === undefined ? undefined : parseRuntimeLockOwner(held.holder).jobId;
      return { ...held, holder, ...(closedOff ? { closedOff } : {}) };
    }
    this.runtime = lease;
    // Built only when someone listens (`emit` drops it otherwise).
    if (deps.events.observes('locked')) {
      deps.events.emit({ type: 'locked', lock: 'runtime', ...this.ids(), waitedMs: lease.takenAt - waitFrom });
    }
    return held;
  }

  /**
   * Gives the run-time lock back after the attempt. On the worker's connection (when it reaches the lock's server) the
   * release is sent without waiting: it still lands before BullMQ's record of the attempt, sent next on it.
   */
  async giveBackRuntimeLock(): Promise<void> {
    const lease = this.runtime;
    if (!lease) return;
    this.runtime = undefined;
    // Closed off (its worker closing): given back on the library's connection, and waited for.
    const inOrderOn = lease.closedOff ? undefined : this.inOrderOn();
    const released = lease.release(inOrderOn).then(
      (wasHeld) => wasHeld && this.emitUnlocked('runtime', lease.takenAt),
      (error: unknown) => this.deps.reportError(this.job, this.digest, error),
    );
    if (!inOrderOn) await released;
  }

  /**
   * The worker closed with force while the handler runs (BullMQ no longer renews the job's lock, and another worker may
   * recover the job): the run-time lock, if held, is closed off ({@link RuntimeLease.closeOff}), so that the recovered
   * copy waits for this handler's end instead of re-entering the lock beside it. A failure is reported, not thrown.
   */
  closeOffRuntimeLock(): void {
    this.runtime?.closeOff().catch((error: unknown) => this.deps.reportError(this.job, this.digest, error));
  }

  /**
   * The run of a job BullMQ failed without calling the processor (stalled or started too often), rebuilt for its end:
   * it still holds its enqueue lock, and a run-time slot its last step parked (without an enqueue lock, under the
   * digest of its data). `undefined`: it holds neither (or its lock arguments cannot be hashed: it took nothing).
   */
  static ofUnprocessed(job: Job<unknown, unknown>, definition: JobDefinition, deps: JobRunDeps): JobRun | undefined {
    const locked = lockedAs(job);
    if (locked) return new JobRun(job, definition, locked.digest, locked.by, deps);
    if (!definition.lock.takesRuntimeLock) return undefined;
    try {
      return new JobRun(job, definition, definition.digestOf(job), undefined, deps);
    } catch {
      return undefined;
    }
  }

  /** Whether the run holds a run-time lock now. */
  get holdsRuntimeLock(): boolean {
    return this.runtime !== undefined;
  }

  /**
   * A step of a step job: the handler moved its job and ended the attempt with `step` (an error name `isStepMove`
   * accepts). The run-time lock stays the job's while it waits (`stepParkedMs`, with `parkedLeaseMs` for its lease: a
   * day past its run time, or while it waits for its children), so a duplicate started meanwhile meets it (the job is
   * still executing, between two steps) and the job's next delivery re-enters it. Resolves whether it was still held
   * (else that delivery takes it anew).
   */
  async parkRuntimeLock(step: string): Promise<boolean> {
    const lease = this.runtime;
    this.runtime = undefined;
    if (!lease) return false;
    const parkedLease = parkedLeaseMs(this.definition.options.runtimeLockLease);
    const recoveryMs = this.stepped?.recoveryMs ?? stallRecoveryMs(undefined);
    const ms = await stepParkedMs(this.job, step, parkedLease, parkedLease, recoveryMs);
    // The step counted in the job: its next deliveries are later steps, even one that takes the slot anew (see
    // parkForRetry).
    return this.park(lease, ms, true);
  }

  /** Parks the attempt's slot `leaseMs` from now for the job's next delivery (see {@link SlotParking.park}). */
  private async park(lease: RuntimeLease, leaseMs: number, countStep = false): Promise<boolean> {
    const { parked, released } = await this.parking.park(lease, leaseMs, countStep);
    if (released) this.emitUnlocked('runtime', lease.takenAt);
    return parked;
  }

  /**
   * A later step of a step job (its attempt re-entered the slot a step parked) failed, and BullMQ retries it or puts it
   * back (a rate limit; `end`: BullMQ's answer, asked only then): the job is still between its steps, so its run-time
   * lock stays its own until it is due again plus `parkedLeaseMs`, as its idempotency claim does (step-handover.ts),
   * and a duplicate started meanwhile meets it. Resolves whether it was parked.
   */
  async parkForRetry(end: () => Promise<{ outcome: string; delay: number }>): Promise<boolean> {
    const lease = this.runtime;
    // A first delivery is no later step, whatever slot it re-entered (a new job given the custom id of a removed job
    // whose slot was parked): BullMQ counts every start of the job.
    if (!lease || this.job.attemptsStarted <= 1) return false;
    // A later step that took the slot anew (the delivery before it crashed mid-step and its lease ended, or the slot
    // parked for it ended first) is still one: the steps its handler moved the job through are counted in the job.
    if (!lease.resumed && !(await this.parking.stepped())) return false;
    const { outcome, delay } = await end();
    if (outcome === 'fails') return false;
    this.runtime = undefined;
    return this.park(lease, wholeDelay(delay) + parkedLeaseMs(this.definition.options.runtimeLockLease));
  }

  /**
   * BullMQ failed the job for good: a run-time lock slot that an acquire without an answer may have taken is given back
   * (no delivery of the job runs any more, so the job-owned slot is nobody's), and one parked for its next delivery.
   */
  async giveBackUnanswered(): Promise<void> {
    const lease = this.asked;
    this.asked = undefined;
    // When it was taken is not known (its answer was lost): the held time reported is 0, not a guess.
    if (lease && (await lease.releaseUnanswered())) this.emitUnlocked('runtime', Date.now());
    // A slot parked for its next delivery (a step job failed without resuming: stalled or started too often, a parent
    // failed by its child) is given back too, also one an earlier build parked under its former owner.
    if (this.definition.lock.takesRuntimeLock && (await this.parking.giveBack()))
      this.emitUnlocked('runtime', Date.now());
  }

  /** The worker's connection, when it is known to reach the server the library's keys live on. */
  private inOrderOn(): Redis | undefined {
    const connection = this.connection?.now;
    return connection && knownOnSameServer(this.deps.client, connection) ? connection : undefined;
  }

  /** {@link inOrderOn}, waiting for the answers while they are not in yet (a worker's first jobs). */
  private async onSameServer(): Promise<Redis | undefined> {
    const connection = await this.connection?.onceKnown();
    return connection && (await onSameServer(this.deps.client, connection)) ? connection : undefined;
  }

  private emitUnlocked(lock: 'enqueue' | 'runtime', since: number): void {
    if (!this.deps.events.observes('unlocked')) return; // built only when it reaches someone
    this.deps.events.emit({ type: 'unlocked', lock, ...this.ids(), heldMs: Math.max(0, Date.now() - since) });
  }

  private ids() {
    const { job, digest } = this;
    return { queue: job.queueName, jobName: job.name, digest, jobId: job.id! };
  }
}
