import { hash } from 'node:crypto';
import type { Job } from 'bullmq';
import {
  attemptEnd,
  isStepMove,
  parkedLeaseMs,
  stallRecoveryMs,
  stepParkedMs,
  wholeDelay,
} from '../common/bullmq-lifecycle.js';
import { describeThrown } from '../errors/thrown.js';
import { bullKeys } from '../redis/keys.js';
import { AttemptReport, type Attempt } from './attempt.js';
import { keyOf } from './attempt-values.js';
import type { ResolvedIdempotency } from './idempotency-definitions.js';
import type { IdempotencyCompletion, IdempotencyHandover } from './idempotency-store.interface.js';
import type { IdempotencyRecordRef } from './idempotency-records.interface.js';
import type { LoggerLike } from '../common/logger.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { ParkedJob, ParkedRecordMarks } from '../redis/parked-record-marks.js';
import { recordIdOf } from './stored-key.js';
import type { WaitingDuplicates } from './waiting-duplicates.js';

/** The prefix of a resume token: an owner no attempt has (theirs are UUIDs), so operators can tell a parked record. */
const RESUME_PREFIX = 'step:';

/**
 * The token a job's claim is handed over to between two of its steps: one per job (its Redis key and creation time),
 * the same at every delivery of it, and no other job's (a later job given the same id has another creation time).
 */
export function resumeOwnerOf(jobKey: string, createdAt: number): string {
  return `${RESUME_PREFIX}${hash('sha256', `${jobKey}\0${createdAt}`, 'base64url')}`;
}

/**
 * The job's run time moved (`job.changeDelay`, `job.promote` through a guarded queue or worker): a claim its last step
 * handed over to its next delivery lasts `parkedLeaseMs` past the new run time, as the handover made it last past the
 * old one (else a duplicate delivered in between would claim the key and run from the first step). The store changes
 * only a record this job's resume token owns (its compare-and-set). One store call, for jobs with an idempotency key.
 */
export async function retimeHandover(
  definition: ResolvedIdempotency,
  job: Job<unknown, unknown>,
  runInMs: number,
  marks: ParkedRecordMarks | undefined,
): Promise<boolean> {
  const ref = handedOverRef(definition, job);
  if (!ref) return false;
  const leaseMs = parkedLeaseMs(definition.options.lease) + wholeDelay(runInMs);
  if (!(await definition.store.handOver!(ref, { owner: ref.owner, leaseMs }))) return false;
  await marks?.mark(ref.owner, parkedJobOf(job), leaseMs);
  return true;
}

/**
 * BullMQ failed `job` for good (its worker's `failed` event): a claim a step of it handed over to its next delivery
 * (the record its resume token owns) has no delivery to come. Released, or kept failed with BullMQ's reason
 * (`onFailure: 'keep'`), as when a later step fails for good. It matters for a job BullMQ failed without calling the
 * processor (stalled too often, started more than `maxStartedAttempts`): no attempt settles its record, which would
 * hold the key for its parked lease (a day; on a SQL store nothing else frees it). One store call, a compare-and-set on
 * the resume token (nothing changes once an attempt took the record), for a job with an idempotency key on a store that
 * hands over. Never throws (a failure is reported).
 */
export async function settleFailedHandover(
  definition: ResolvedIdempotency,
  job: Job<unknown, unknown>,
  deps: {
    events: UniqueJobsEvents;
    logger: LoggerLike;
    parkedRecords?: ParkedRecordMarks;
    waiting?: WaitingDuplicates;
  },
): Promise<void> {
  const ref = handedOverRef(definition, job);
  if (!ref) return;
  const ids = { queue: job.queueName, jobName: job.name, jobId: job.id!, scope: ref.scope, key: ref.key };
  const report = new AttemptReport(deps.events, deps.logger, { ...ids, store: definition.storeName });
  try {
    const failed = { failedReason: job.failedReason };
    await settleParked(definition, ref, failed, report, { marks: deps.parkedRecords, waiting: deps.waiting });
  } catch (error) {
    report.error(error);
  }
}

/**
 * Settles a record parked for a job that ended without an attempt settling it (`ref.owner`: its resume token): kept
 * failed with BullMQ's reason when the key keeps failures (`onFailure: 'keep'`) and the job failed (`failed` given),
 * else released; reported on `report` (`idempotencyFailureKept`, `idempotencyReleased`). Once settled, its parked mark
 * is removed and the deliveries that met it parked, in any process, are woken (`WaitingDuplicates.parkedSettled`). One
 * store call, a compare-and-set on the resume token: resolves whether it changed the record. Rejects when the store
 * call fails (a mark left behind lapses with the record's lease).
 */
export async function settleParked(
  definition: ResolvedIdempotency,
  ref: IdempotencyRecordRef,
  failed: { failedReason: string | undefined } | undefined,
  report: AttemptReport,
  after: { marks: ParkedRecordMarks | undefined; waiting: WaitingDuplicates | undefined },
): Promise<boolean> {
  const { store, options } = definition;
  let settled: boolean;
  if (failed && options.onFailure === 'keep') {
    const error = JSON.stringify(describeThrown({ name: 'Error', message: failed.failedReason }));
    settled = await store.fail(ref, { error, ttlMs: options.ttl });
    if (settled) report.emit({ type: 'idempotencyFailureKept' });
  } else {
    settled = await store.release(ref);
    if (settled) report.emit({ type: 'idempotencyReleased' });
  }
  if (!settled) return false;
  after.marks?.unmark(ref.owner).catch((error: unknown) => report.markError(error));
  after.waiting?.parkedSettled(recordIdOf(ref.scope, ref.key));
  return true;
}

/**
 * The claim of `attempt` resumed its job's record (a later step of a step job): no longer parked, its mark goes (not
 * waited for; sent before any later park's mark, on the same connection).
 */
export function resumedStep(attempt: Attempt, resumeOwner: string | undefined): void {
  attempt.resumed = true;
  if (resumeOwner !== undefined)
    attempt.marks?.unmark(resumeOwner).catch((error: unknown) => attempt.report.markError(error));
}

/**
 * Marks where `attempt`'s job lives before its record is handed over to it (`ParkedRecordMarks`), for as long as the
 * handover lasts: sent, not waited for (sent before the handover, and before any later unmark of this process, on the
 * same connection). The handover never waits for the library's Redis: a SQL store's handover needed none, and a claim
 * whose handover is held past its lease (no longer renewed: the handler ended) is taken over by a duplicate, which runs
 * the handler from its first step. A mark that fails, or lands after the job's next delivery removed it (another
 * process), names the token's own job still (harmless; it lapses with the lease); a record without one waits for its
 * lease, as one parked by another deployment.
 */
function markParked(attempt: Attempt, handover: IdempotencyHandover): void {
  const { marks, job, report } = attempt;
  marks?.mark(handover.owner, parkedJobOf(job), handover.leaseMs).catch((error: unknown) => {
    report.markError(error);
  });
}

/** What a parked mark names of `job`: where it lives, and what the events of its settling name. */
function parkedJobOf(job: Job<unknown, unknown>): ParkedJob {
  return { qualifiedName: job.queueQualifiedName, jobId: job.id!, queue: job.queueName, jobName: job.name };
}

/**
 * The token a step of `job` hands its claim over to (see {@link resumeOwnerOf}), when its store can hand over in this
 * mode; `jobKey`: the job's Redis key, when the caller has it.
 */
export function resumeOwnerFor(
  definition: ResolvedIdempotency,
  job: Job<unknown, unknown>,
  jobKey = bullKeys.job(job.queueQualifiedName, job.id!),
): string | undefined {
  const { store, options } = definition;
  const handsOver = store.handOver && (!options.transactional || store.handsOverInTransaction);
  return handsOver && Number.isFinite(job.timestamp) ? resumeOwnerOf(jobKey, job.timestamp) : undefined;
}

/** The record `job`'s steps hand over (owned by its resume token), if its store hands over and it has a key. */
function handedOverRef(definition: ResolvedIdempotency, job: Job<unknown, unknown>): IdempotencyRecordRef | undefined {
  const owner = resumeOwnerFor(definition, job);
  const keyed = owner === undefined ? undefined : keyOf(definition, job);
  if (!keyed || 'missing' in keyed) return undefined;
  return { scope: definition.scopeOf(job), key: keyed.key, owner: owner! };
}

/** Whether a record's owner is a resume token: the record is parked between two steps of its job, no handler runs. */
export function isHandedOver(owner: string | undefined): boolean {
  return owner?.startsWith(RESUME_PREFIX) === true;
}

/** The handover of `attempt`'s claim after the step `step` (an error name `isStepMove` accepts). */
async function handoverOf(attempt: Attempt, step: string, resumeOwner: string): Promise<IdempotencyHandover> {
  const { lease, ttl } = attempt.definition.options;
  // A day past its run time (parkedLeaseMs); waiting for its children, the key's retention when longer (on Redis the
  // orphan reaper releases the record early once the job is gone or finished).
  const leaseMs = await stepParkedMs(attempt.job, step, parkedLeaseMs(lease), ttl, stallRecoveryMs(attempt.worker));
  const handover = { owner: resumeOwner, leaseMs };
  markParked(attempt, handover);
  return handover;
}

/**
 * The handler ended between two steps of its job (see {@link isStepMove}), or a later step (the attempt resumed a
 * handover) failed and BullMQ retries it: hands the claim over to the job's next delivery, so that a duplicate delivered
 * meanwhile waits instead of running the handler from its first step. `false`: neither (a first step's failure, a
 * failure for good), or a store without `handOver`: the caller releases or keeps the claim as after any failure. Never
 * throws: a store out of reach leaves the claim to its lease, which the job's own next delivery takes over.
 */
export async function handOverStep(
  attempt: Attempt,
  error: unknown,
  resumeOwner: string | undefined,
): Promise<boolean> {
  const { store, options } = attempt.definition;
  if (!store.handOver || resumeOwner === undefined) return false;
  try {
    let handover: IdempotencyHandover;
    let step: string;
    if (isStepMove(error)) {
      step = error.name;
      handover = await handoverOf(attempt, step, resumeOwner);
    } else {
      // A later step of a step job (its claim resumed a handover) that failed: its retry resumes at this step, so the
      // claim is the job's until then too, lest a duplicate run from the first step meanwhile. Failed for good: no.
      if (!attempt.resumed) return false;
      const end = await attemptEnd(attempt.job, error);
      if (end.outcome === 'fails') return false;
      step = describeThrown(error).name;
      handover = { owner: resumeOwner, leaseMs: end.delay + parkedLeaseMs(options.lease) };
      markParked(attempt, handover);
    }
    if (await store.handOver(attempt.ref, handover)) {
      attempt.report.emit({ type: 'idempotencyHandedOver', step, leaseMs: handover.leaseMs });
    }
  } catch (storeError) {
    attempt.report.error(storeError);
  }
  return true;
}

/**
 * Transactional mode: a step of a step job commits its writes with the record handed over to the job's next delivery
 * (the store's completion, `IdempotencyCompletion.handover`), instead of rolling them back while `job.updateData` has
 * already stored the next step. Runs the handler ({@link run}), gives the completion ({@link completion}), then, once
 * committed, ends the attempt as the handler did ({@link rethrow}).
 */
export class TransactionStep {
  private step: { name: string } | undefined;
  private handover: IdempotencyHandover | undefined;

  /** `resumeOwner`: the job's resume token, `undefined` when the store cannot hand over in a transaction. */
  constructor(
    private readonly attempt: Attempt,
    private readonly resumeOwner: string | undefined,
  ) {}

  /** Runs the handler: a step move resolves `undefined` (its error kept for {@link rethrow}); any other error throws. */
  async run<T>(handler: () => Promise<T>): Promise<T | undefined> {
    try {
      return await handler();
    } catch (error) {
      if (this.resumeOwner === undefined || !isStepMove(error)) throw error;
      this.step = error;
      this.handover = await handoverOf(this.attempt, error.name, this.resumeOwner);
      return undefined;
    }
  }

  /** The completion of a step (the record handed over), or `undefined` when the handler returned. */
  completion(ttlMs: number): IdempotencyCompletion | undefined {
    return this.handover && { result: undefined, ttlMs, handover: this.handover };
  }

  /** After the commit: throws the step's error, as the handler did, for BullMQ (nothing when the handler returned). */
  rethrow(completion: IdempotencyCompletion | undefined): void {
    if (!this.step || !completion?.handover) return;
    this.attempt.report.emit({
      type: 'idempotencyHandedOver',
      step: this.step.name,
      leaseMs: completion.handover.leaseMs,
    });
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- what the handler threw, as BullMQ must see it
    throw this.step;
  }
}
