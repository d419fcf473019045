import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { IdempotencyConnectionLostError } from '../errors/idempotency-connection-lost.error.js';
import { IdempotencyLeaseLostError } from '../errors/idempotency-lease-lost.error.js';
import { MissingIdempotencyKeyError } from '../errors/missing-idempotency-key.error.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { LoggerLike } from '../common/logger.js';
import { LeaseKeeper } from '../locks/lease-keeper.js';
import { AttemptContext } from './idempotency-context.js';
import { completedBy, keyOf, storedResult } from './attempt-values.js';
import type { WaitingDuplicates, WorkerLike } from './waiting-duplicates.js';
import type { ResolvedIdempotency } from './idempotency-definitions.js';
import { claimThenTransaction } from './claim-then-transaction.js';
import { claimFresh, heldBy, type FreshClaim } from './fresh-claim.js';
import type { Attempt } from './attempt.js';
import { startAttempt } from './attempt-start.js';
import type { ParkedRecordMarks } from '../redis/parked-record-marks.js';
import { answerHeldKey } from './held-key.js';
import { IdempotencyTransactionEndedError } from '../errors/idempotency-transaction-ended.error.js';
import { afterFailure, keepFailure, releaseUnanswered } from './attempt-failure.js';
import { handOverStep, resumedStep, settleFailedHandover, TransactionStep } from './step-handover.js';
import type {
  IdempotencyCompletion,
  IdempotencyTransactionalClaim,
  IdempotencyTransactionResult,
  TransactionClaim,
} from './idempotency-store.interface.js';

type Processor = (job: Job<unknown, unknown>, token?: string, signal?: AbortSignal) => Promise<unknown>;

/**
 * Runs a handler under `@IdempotencyKey`: claim → handler → complete (or release), with the lease renewed while the
 * handler runs; a completed key is replayed, a running one waits, a reused key with another payload fails. See
 * docs/idempotency.md for the record's lifecycle.
 */
export class IdempotencyRunner {
  constructor(
    private readonly deps: {
      events: UniqueJobsEvents;
      logger: LoggerLike;
      /** Wakes the deliveries waiting for a key when its holder settles it (else they wait for the holder's lease). */
      waiting?: WaitingDuplicates;
      /** Where step jobs whose records are parked live (a record whose job is gone is settled: `settleStaleHandover`). */
      parkedRecords?: ParkedRecordMarks;
    },
  ) {}

  /** Starts listening for deliveries that wait for the keys this process will hold (bootstrap). */
  listen(): Promise<void> {
    return this.deps.waiting?.listen() ?? Promise.resolve();
  }

  /** Stops listening for waiting deliveries (module shutdown). */
  close(): Promise<void> {
    return this.deps.waiting?.close() ?? Promise.resolve();
  }

  /**
   * BullMQ failed `job` for good (its worker's `failed` event): a record a step of it parked for its next delivery is
   * settled (see {@link settleFailedHandover}), and the deliveries waiting for it woken. Never throws.
   */
  failedForGood(definition: ResolvedIdempotency, job: Job<unknown, unknown>): Promise<void> {
    return settleFailedHandover(definition, job, this.deps);
  }

  /** Runs `next` (the handler, or the rest of the interceptor chain) for `job` at most once per key. */
  async run(
    definition: ResolvedIdempotency,
    job: Job<unknown, unknown>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    next: Processor,
    connection?: Redis,
    worker?: WorkerLike,
  ): Promise<unknown> {
    const keyed = keyOf(definition, job);
    if ('missing' in keyed) {
      const run = definition.options.onMissingKey === 'run';
      const action = run ? 'ran' : 'failed';
      this.deps.events.emit({
        type: 'idempotencyMissingKey',
        queue: job.queueName,
        jobName: job.name,
        jobId: job.id!,
        action,
        got: keyed.missing,
      });
      if (!run) throw new MissingIdempotencyKeyError(job.queueName, job.name, job.id, keyed.missing);
      this.deps.logger.warn(
        `Job ${job.id} ("${job.name}" on queue "${job.queueName}") has no idempotency key (the key function returned ${keyed.missing}): running it without idempotency (onMissingKey: 'run')`,
      );
      return next(job, token, signal);
    }
    const { attempt, request } = startAttempt(definition, keyed.key, job, token, signal, worker, this.deps);
    const { owner, fingerprint, resumeOwner } = request;
    if (definition.options.transactional) return this.runInTransaction(attempt, request, next);
    let fresh: FreshClaim;
    try {
      fresh = await claimFresh(definition.store, request); // an answer read late is confirmed before the handler starts
    } catch (error) {
      // No longer waiting either: a settle of the key must not promote it out of the backoff of its retry.
      this.answered(attempt);
      releaseUnanswered(attempt);
      throw error;
    }
    this.answered(attempt);
    const { claim, sentAt } = fresh;
    // Owner tokens are per attempt, so a live record of this token is this attempt's own claim, applied once already:
    // the client sent it again after its connection dropped (ioredis resends unanswered commands). It holds the key.
    if (!claim.claimed && !heldBy(claim, owner)) return answerHeldKey(attempt, claim, fingerprint, this.deps.waiting);
    if (claim.claimed && (claim.resumed || claim.laterStep)) resumedStep(attempt, resumeOwner);
    // A resumed step is no takeover: nobody died mid-run (the store counts it as one; the event and context do not).
    const context = this.claimed(attempt, claim.claimed ? claim.takeover && !claim.resumed : claim.record.attempts > 1);
    return context.run(job, () => this.runThenComplete(attempt, next, connection, sentAt, resumeOwner));
  }

  /** The delivery got its claim's answer (it no longer waits for the key). */
  private answered(attempt: Attempt): void {
    if (attempt.worker) this.deps.waiting?.answered(attempt.recordId, attempt.worker, attempt.job.id!);
  }

  /** The claim won: say so, hold the key for the deliveries that wait for it, and build the handler's context. */
  private claimed(attempt: Attempt, takeover: boolean): AttemptContext {
    attempt.report.emit({ type: 'idempotencyClaimed', takeover });
    if (attempt.worker) this.deps.waiting?.holding(attempt.recordId, attempt.worker, attempt.ref.owner);
    return new AttemptContext(attempt.ref.scope, attempt.ref.key, takeover);
  }

  /**
   * The record is settled (or lost), or handed over to the job's next delivery (`handedOver`): the deliveries waiting
   * for it run now. `resumedFrom`: the resume token the claim took the record over from (a later step of a step job).
   */
  private settled(attempt: Attempt, handedOver = false, resumedFrom?: string): void {
    this.deps.waiting?.settled(attempt.recordId, {
      handedOver,
      ...(attempt.resumed && resumedFrom !== undefined ? { resumedFrom } : {}),
    });
  }

  /**
   * Plain mode: the handler's effect lands wherever it writes, while the claim's lease is renewed; then the record is
   * completed. Renewing stops before the claim is settled, so a late renewal is not taken for a lost lease. When the
   * store can send the completion on the worker's `connection` (`IdempotencyStore.completeInOrder`), it lands
   * before BullMQ records the job completed and its answer is handled without holding the job.
   */
  private async runThenComplete(
    attempt: Attempt,
    next: Processor,
    connection: Redis | undefined,
    sentAt: number,
    resumeOwner: string | undefined,
  ): Promise<unknown> {
    const { job, token, signal, definition, ref } = attempt;
    const { store, options } = definition;
    // The lease counts from when the claim (or the renewal that confirmed it) was sent, not from its answer.
    const keeper = new LeaseKeeper(() => store.renew(ref, options.lease), options.lease, attempt.report, sentAt);
    let value: unknown;
    try {
      value = await next(job, token, signal);
    } catch (error) {
      keeper.stop();
      const handedOver = await handOverStep(attempt, error, resumeOwner);
      if (!handedOver) await afterFailure(attempt, error);
      this.settled(attempt, handedOver, resumeOwner);
      throw error;
    }
    keeper.stop();
    let result: string | undefined;
    try {
      result = storedResult(attempt, value);
    } catch (error) {
      // The effect has happened: the key is kept failed, naming why, whatever `onFailure`, so that no later delivery
      // runs it again (released, the next one would).
      await keepFailure(attempt, error).catch((storeError: unknown) => attempt.report.error(storeError));
      this.settled(attempt, false, resumeOwner);
      throw error;
    }
    const completion = { result, ttlMs: definition.options.ttl };
    const inOrder = connection && definition.store.completeInOrder?.(connection, ref, completion);
    const settled = (inOrder ?? definition.store.complete(ref, completion))
      .then((completed) => this.afterCompletion(attempt, completed))
      .finally(() => this.settled(attempt, false, resumeOwner));
    if (inOrder) settled.catch((error: unknown) => attempt.report.error(error));
    else await settled;
    return value;
  }

  private async afterCompletion(attempt: Attempt, completed: boolean): Promise<void> {
    if (
      completed ||
      // A completion the client sent again after its connection dropped (ioredis resends unanswered commands) finds the
      // record already completed by this very claim: that is not a lost lease.
      (await completedBy(attempt.definition, attempt.ref))
    ) {
      attempt.report.emit({ type: 'idempotencyCompleted' });
    } else {
      attempt.report.leaseLost('the handler finished after its claim was taken over, so its effect may have run twice');
    }
  }

  /**
   * Transactional mode: the claim, the handler's writes and the completed record in one transaction of the store
   * (`claimInTransaction`), or, on a store without it, a claim followed by a transaction that locks the record. No
   * lease renewal either way: the transaction holds the key.
   */
  private async runInTransaction(
    attempt: Attempt,
    request: IdempotencyTransactionalClaim,
    next: Processor,
  ): Promise<unknown> {
    const { job, token, signal, definition } = attempt;
    const { store } = definition;
    const step = new TransactionStep(attempt, request.resumeOwner);
    let context: AttemptContext | undefined;
    const won = (takeover: boolean) => {
      this.answered(attempt);
      context = this.claimed(attempt, takeover);
    };
    const work = (transaction: unknown, claim: TransactionClaim) => {
      // A claim not committed before the work leaves nothing behind when its worker dies: that the job's delivery
      // before this one stalled (BullMQ's own count) is what says an earlier attempt may have run part of the handler.
      if (!context) won((claim.takeover && !claim.resumed) || (claim.uncommitted === true && job.stalledCounter > 0));
      if (claim.resumed || claim.laterStep) resumedStep(attempt, request.resumeOwner);
      context!.transaction = transaction;
      return step.run(() => context!.run(job, () => next(job, token, signal)));
    };
    const ttlMs = definition.options.ttl;
    let done: IdempotencyCompletion | undefined;
    const completion = (result: unknown) =>
      (done = step.completion(ttlMs) ?? { result: storedResult(attempt, result), ttlMs });
    let outcome: IdempotencyTransactionResult<unknown>;
    let handedOver = false;
    try {
      outcome = await (store.claimInTransaction
        ? store.claimInTransaction(request, work, completion)
        : claimThenTransaction(store, request, work, completion, won));
    } catch (error) {
      if (!context) {
        // The claim itself failed, or what came between it and the work (a transaction that did not open). A claim
        // made inside the transaction rolled back with it; one made before it (a claim, then a transaction) may be
        // held, its answer lost or the transaction refused. No longer waiting for the key (see plain mode).
        this.answered(attempt);
        releaseUnanswered(attempt);
        throw error;
      }
      if (error instanceof IdempotencyLeaseLostError) {
        attempt.report.leaseLost(
          'its claim was taken over before its transaction could lock the record; nothing was committed',
        );
      } else {
        // The store's connection dropped mid-transaction: say so (naming the store), then release as for any failure.
        if (error instanceof IdempotencyConnectionLostError) attempt.report.error(error);
        // A resumed step job's claim, committed before its transaction (claim, then transaction: SQLite), stays the
        // job's for a retry, as in plain mode; one made inside the transaction rolled back to the handover it resumed.
        // (Not when the handler's writes may be committed: that failure is kept, so none runs them again.)
        const committed = error instanceof IdempotencyTransactionEndedError && error.outcome !== 'rolled back';
        handedOver = !committed && (await handOverStep(attempt, error, request.resumeOwner));
        if (!handedOver) await afterFailure(attempt, error);
      }
      throw error;
    } finally {
      if (context) {
        context.transaction = undefined;
        this.settled(attempt, handedOver || done?.handover !== undefined, request.resumeOwner);
      }
    }
    if (!outcome.claimed) {
      this.answered(attempt);
      return answerHeldKey(attempt, outcome, request.fingerprint, this.deps.waiting);
    }
    step.rethrow(done); // a step of a step job: committed with the record handed over
    attempt.report.emit({ type: 'idempotencyCompleted' });
    return outcome.value;
  }
}
