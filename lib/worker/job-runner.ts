import { DelayedError, type Job, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { attemptEnd, attemptOutcome, isStepMove, stallRecoveryMs } from '../common/bullmq-lifecycle.js';
import type { AnnotateOperation } from '../interfaces/job-instrumentation.interface.js';
import type { ConflictTools } from '../conflicts/conflict-strategy.interface.js';
import { rethrowNullish } from '../errors/thrown.js';
import type { IdempotencyDefinitions, ResolvedIdempotency } from '../idempotency/idempotency-definitions.js';
import type { IdempotencyRunner } from '../idempotency/idempotency.runner.js';
import { ADMITTED, type JobEnd } from '../locks/lock.js';
import type { AcquireResult } from '../locks/lock-store.js';
import { lockedAs } from '../locks/locked-digest.js';
import type { JobDefinition, JobDefinitions } from '../options/job-definitions.js';
import { JobRun, type JobRunDeps } from './job-run.js';
import { postponeIfLoginRefused } from './refused-login.js';
import { superseded } from './superseded-retry.js';
import { closingSignal, isAbortError, onForcedClose, putBack, signalsOf, waitForOwnRun } from './worker-closing.js';
import { workerConnectionRef, type WorkerConnectionRef } from './worker-connection.js';
import { UnlockedArrivals } from './unlocked-arrivals.js';
import { UnmatchedNames } from './unmatched-names.js';

/** A processor's `process`, as BullMQ calls it. */
export type ProcessFn = (job: Job<unknown, unknown>, token?: string, signal?: AbortSignal) => Promise<unknown>;

/** What the worker side works with, built by the module. */
export interface JobRunnerDeps extends JobRunDeps {
  readonly definitions: JobDefinitions;
  readonly idempotencyDefinitions: IdempotencyDefinitions;
  readonly idempotency: IdempotencyRunner;
  /** What conflict strategies may do. */
  readonly tools: ConflictTools;
  /** `false`: jobs pass straight through. */
  readonly enabled: boolean;
  /** Whether Redis refuses the login of the library's connection now (its `error` event said so). */
  loginRefused(): boolean;
}

/**
 * The worker side, one job at a time: run-time lock → idempotency → handler → settle, the lock type's hooks at each
 * step, and its `finished` hook once BullMQ recorded the job's end (the worker's `completed` and `failed` events).
 */
export class JobRunner {
  /** The run of each job a worker of this process is running, until BullMQ records its end. */
  private readonly runs = new WeakMap<Job<unknown, unknown>, JobRun>();
  /** Handlers (the processors' own code) called and not settled yet. */
  private handlers = 0;
  private readonly unlocked: UnlockedArrivals;
  private readonly unmatched: UnmatchedNames;

  constructor(private readonly deps: JobRunnerDeps) {
    this.unlocked = new UnlockedArrivals(deps.logger);
    this.unmatched = new UnmatchedNames(deps.definitions, deps.logger);
  }

  /** Whether a processor's own code is running (what the library does around it is not counted). */
  get handlersRunning(): boolean {
    return this.handlers > 0;
  }

  /** Runs a job's handler inside its locks, then under its idempotency key. */
  process(
    job: Job<unknown, unknown>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    run: ProcessFn,
    worker?: Worker,
  ) {
    const { enabled, idempotencyDefinitions, tracer } = this.deps;
    const keyed = enabled ? idempotencyDefinitions.find(job.queueName, job.name) : undefined;
    const definition = this.definitionOf(job);
    if (!keyed && !definition) {
      if (enabled) this.unmatched.note(job);
      return this.counted(run, job, token, signal);
    }
    let handled = false;
    const handler: ProcessFn = async (j, t, s) => {
      handled = true;
      try {
        return await this.counted(run, j, t, s);
      } catch (thrown) {
        // A step of a step job (the handler moved its job): what the job holds stays its own while it waits.
        const stepping = isStepMove(thrown) ? this.runs.get(j) : undefined;
        if (stepping) stepping.stepped = { recoveryMs: stallRecoveryMs(worker) };
        // A `throw null` fails the attempt too, also one thrown synchronously (a `process` that is no async function).
        return rethrowNullish(thrown);
      }
    };
    // The connection BullMQ records the job's end on: what is settled after the handler is sent there first.
    const connection = workerConnectionRef(worker);
    const underKey = keyed ? this.underKey(keyed, handler, connection.now, worker) : undefined;
    // Failed before its handler ran because Redis refused the library's login: put back, its attempts untouched. A
    // claim is put back where it failed, so the lock type's hooks see a job moved (not one failed for good) and keep
    // what it holds while it waits.
    const postponed = (j: Job<unknown, unknown>, t: string | undefined, error: unknown): Promise<never> => {
      if (handled || isDelayedError(error) || !this.deps.loginRefused()) throw error;
      return postponeIfLoginRefused(j, t, error);
    };
    const next: ProcessFn = underKey
      ? (j, t, s) => underKey(j, t, s).catch((error: unknown) => postponed(j, t, error))
      : handler;
    const processed = definition
      ? tracer.run('process', { queue: job.queueName, jobName: job.name, lock: definition.options.lock }, (annotate) =>
          this.runLocked(job, token, signal, next, definition, connection, annotate, closingSignal(worker)),
        )
      : tracer.run('process', { queue: job.queueName, jobName: job.name }, () => next(job, token, signal));
    return processed.catch((error: unknown) => postponed(job, token, error)); // e.g. the run-time lock's take
  }

  /** Calls a handler, counted in {@link handlersRunning} until it settles. */
  private counted(run: ProcessFn, job: Job<unknown, unknown>, token?: string, signal?: AbortSignal): Promise<unknown> {
    this.handlers++;
    let result: Promise<unknown>;
    try {
      result = run(job, token, signal);
    } catch (error) {
      this.handlers--;
      throw error;
    }
    const settled = () => void this.handlers--;
    Promise.resolve(result).then(settled, settled);
    return result;
  }

  /**
   * BullMQ recorded a job completed, or failed for good (the worker's events): the lock type's `finished` hook, and a
   * failed job's handed-over idempotency claim settled.
   */
  async finished(job: Job<unknown, unknown>, end: JobEnd): Promise<void> {
    // A claim a step handed over to the job's next delivery, which will not come (IdempotencyRunner.failedForGood).
    const { enabled, idempotencyDefinitions } = this.deps;
    const keyed = enabled && end === 'failed' ? idempotencyDefinitions.find(job.queueName, job.name) : undefined;
    if (keyed) await this.deps.idempotency.failedForGood(keyed, job);
    const definition = this.definitionOf(job);
    if (!definition) return;
    let run = this.runs.get(job);
    this.runs.delete(job);
    run ??= JobRun.ofUnprocessed(job, definition, this.deps); // failed without calling the processor
    if (!run) return;
    const current = run;
    await this.quietly(job, run.digest, () => definition.lock.finished(current, end));
    if (end === 'failed') await this.quietly(job, run.digest, () => current.giveBackUnanswered());
    run.enqueueLock?.ended();
  }

  /** BullMQ recorded a failed attempt that it retries (the worker's `failed` event): after a backoff, see {@link delayed}. */
  async retried(job: Job<unknown, unknown>): Promise<void> {
    const run = this.runs.get(job);
    if (!run || !this.followsDelays(run)) return;
    await this.quietly(job, run.digest, async () => {
      // Asked of BullMQ: whether this retry waits for a backoff (a retry at once, or one already started, does not).
      if ((await job.getState()) === 'delayed') await this.delayed(run);
    });
  }

  private async runLocked(
    job: Job<unknown, unknown>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    next: ProcessFn,
    definition: JobDefinition,
    connection: WorkerConnectionRef,
    annotate: AnnotateOperation,
    closing: AbortSignal | undefined,
  ): Promise<unknown> {
    const locked = lockedAs(job);
    const digest = locked?.digest ?? this.unlocked.digestOf(definition, job);
    annotate({ digest });
    const run = new JobRun(job, definition, digest, locked?.by, this.deps, connection, signalsOf(signal, closing));
    this.runs.set(job, run);
    let closed: (() => void) | undefined;
    try {
      const admitted = await definition.lock.start(run).catch((error: unknown) => {
        if (!closing?.aborted || !isAbortError(error)) throw error;
        return putBack(job, token, error, closing, () => this.delayed(run));
      });
      if (!admitted.acquired && admitted.closedOff) {
        return await waitForOwnRun(job, token, admitted, closing, () => this.delayed(run));
      }
      if (!admitted.acquired) return await this.conflicted(run, token, admitted.holder);
      let value: unknown;
      if (run.holdsRuntimeLock) closed = onForcedClose(closing, () => run.closeOffRuntimeLock());
      try {
        value = await next(job, token, signal);
      } catch (error) {
        let end: ReturnType<typeof attemptEnd> | undefined;
        const endOf = () => (end ??= attemptEnd(job, error)); // asked of BullMQ once, on demand
        const outcomeOf = async () => (await endOf()).outcome;
        const attempt = { endsJob: async () => (await outcomeOf()) === 'fails' };
        let retry: AcquireResult = ADMITTED;
        await this.quietly(job, digest, async () => void (retry = await definition.lock.attemptFailed(run, attempt)));
        if (isDelayedError(error)) await this.delayed(run); // the handler moved it
        if (run.stepped) await this.quietly(job, digest, async () => void (await run.parkRuntimeLock(stepOf(error))));
        else if (retry.acquired) await this.quietly(job, digest, async () => void (await run.parkForRetry(endOf)));
        // Only a retry BullMQ is about to make can be refused; a job its handler moved already is where it goes.
        if (!retry.acquired && (await outcomeOf()) === 'retries') throw superseded(run, error, retry.holder, this.deps);
        throw error;
      }
      await this.quietly(job, digest, () => definition.lock.succeeded(run));
      return value;
    } finally {
      closed?.();
      await run.giveBackRuntimeLock();
    }
  }

  /**
   * A run-time conflict (`holder` holds the lock): the server strategy decides. When it ends the job — it returns (the
   * job completes) or throws and BullMQ fails the job for good by its own rule (asked of BullMQ: not a retry, nor a move
   * the strategy made) — the lock type releases what the job still holds before BullMQ records the end.
   */
  private async conflicted(run: JobRun, token: string | undefined, holder: string | undefined): Promise<unknown> {
    const { job, digest, definition } = run;
    const ended = (endsJob = async () => true) =>
      this.quietly(job, digest, async () => {
        if (await endsJob()) await definition.lock.endedByConflict(run);
      });
    let value: unknown;
    try {
      value = await definition.serverStrategy!.onServerConflict!(
        { side: 'server', job, token, digest, existingJobId: holder, definition },
        this.deps.tools,
      );
    } catch (error) {
      if (!isDelayedError(error)) await ended(async () => (await attemptOutcome(job, error)) === 'fails');
      else await this.delayed(run); // rescheduled
      throw error;
    }
    await ended();
    return value;
  }

  /**
   * Whether a move of the job to delayed moves its enqueue lock's end: a lock with a `lockTtl` that holds while its job
   * waits (not `until_expired`, whose TTL is the whole point), as a guarded `changeDelay` makes it; also a deduplication
   * key a job was added with a TTL under earlier options (a `lockTtl` removed since: the job's stored options say so).
   */
  private followsDelays(run: JobRun): boolean {
    return run.enqueueLock?.endsAtTtl() === true && !run.definition.lock.outlivesJob;
  }

  /**
   * BullMQ moved the job to delayed after an attempt (a retry's backoff, the handler's `DelayedError`, a `reschedule`):
   * the enqueue lock it holds lasts its `lockTtl` past the new run time (`job.delay`, which BullMQ set with the move),
   * else it could end while the job waits and let a duplicate in (when it {@link followsDelays}).
   */
  private async delayed(run: JobRun): Promise<void> {
    if (!this.followsDelays(run)) return;
    const { job, digest } = run;
    await this.quietly(job, digest, () => run.enqueueLock!.retime(Math.max(0, job.delay)));
  }

  /** The handler under `@IdempotencyKey` (claim → handler → complete). */
  private underKey(
    keyed: ResolvedIdempotency,
    handler: ProcessFn,
    connection: Redis | undefined,
    worker: Worker | undefined,
  ): ProcessFn {
    return (job, token, signal) =>
      this.deps.tracer.run('idempotency', { queue: job.queueName, jobName: job.name, store: keyed.storeName }, () =>
        this.deps.idempotency.run(keyed, job, token, signal, handler, connection, worker),
      );
  }

  private definitionOf(job: Job<unknown, unknown>): JobDefinition | undefined {
    return this.deps.enabled ? this.deps.definitions.find(job.queueName, job.name) : undefined;
  }

  /** Runs a bookkeeping step whose failure must not change the job's outcome; the failure is reported. */
  private async quietly(job: Job<unknown, unknown>, digest: string, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (error) {
      this.deps.reportError(job, digest, error);
    }
  }
}

/** The name of the error a step of a step job ended with. */
function stepOf(error: unknown): string {
  return String((error as { name?: unknown }).name);
}

/** BullMQ's own test of a `DelayedError` (by class or name, as its worker makes it). */
function isDelayedError(error: unknown): boolean {
  return error instanceof DelayedError || (error instanceof Error && error.name === 'DelayedError');
}
