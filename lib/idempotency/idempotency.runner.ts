import { randomUUID } from 'node:crypto';
import { DelayedError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { IdempotencyConnectionLostError } from '../errors/idempotency-connection-lost.error.js';
import { IdempotencyInProgressError } from '../errors/idempotency-in-progress.error.js';
import { IdempotencyKeyFailedError } from '../errors/idempotency-key-failed.error.js';
import { IdempotencyKeyMismatchError } from '../errors/idempotency-key-mismatch.error.js';
import { IdempotencyLeaseLostError } from '../errors/idempotency-lease-lost.error.js';
import { IdempotencyTransactionEndedError } from '../errors/idempotency-transaction-ended.error.js';
import { MissingIdempotencyKeyError } from '../errors/missing-idempotency-key.error.js';
import { UnserializableIdempotencyResultError } from '../errors/unserializable-idempotency-result.error.js';
import type { DistributiveOmit, IdempotencyEvent, UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { attemptOutcome } from '../common/bullmq-lifecycle.js';
import type { LoggerLike } from '../common/logger.js';
import { LeaseKeeper } from '../locks/lease-keeper.js';
import { AttemptContext } from './idempotency-context.js';
import { completedBy, keyOf, serializeResult } from './attempt-values.js';
import { recordIdOf, type WaitingDuplicates, type WorkerLike } from './waiting-duplicates.js';
import type { ResolvedIdempotency } from './idempotency-definitions.js';
import type { IdempotencyClaimResult, IdempotencyRecordRef } from './idempotency-store.interface.js';

type Processor = (job: Job, token?: string, signal?: AbortSignal) => Promise<unknown>;

/** What every event and message of one attempt names. */
interface Attempt {
  job: Job;
  token: string | undefined;
  signal: AbortSignal | undefined;
  definition: ResolvedIdempotency;
  ref: IdempotencyRecordRef;
  /** The record's hashed id (what waiting deliveries name it by). */
  recordId: string;
  /** The worker running the job (what promotes the deliveries waiting for its key). */
  worker: WorkerLike | undefined;
  ids: { queue: string; jobName: string; jobId: string; scope: string; key: string; store: string };
}

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

  /** Runs `next` (the handler, or the rest of the interceptor chain) for `job` at most once per key. */
  async run(
    definition: ResolvedIdempotency,
    job: Job,
    token: string | undefined,
    signal: AbortSignal | undefined,
    next: Processor,
    connection?: Redis,
    worker?: WorkerLike,
  ): Promise<unknown> {
    const base = { queue: job.queueName, jobName: job.name, jobId: job.id! };
    const keyed = keyOf(definition, job);
    if ('missing' in keyed) {
      const run = definition.options.onMissingKey === 'run';
      this.deps.events.emit({ type: 'idempotencyMissingKey', ...base, action: run ? 'ran' : 'failed' });
      const error = new MissingIdempotencyKeyError(job.queueName, job.name, job.id, keyed.missing);
      if (!run) throw error;
      this.deps.logger.warn(`${error.message.split(':')[0]}: running it without idempotency (onMissingKey: 'run')`);
      return next(job, token, signal);
    }
    const { store, options } = definition;
    const scope = definition.scopeOf(job);
    const ref = { scope, key: keyed.key, owner: randomUUID() };
    const attempt: Attempt = {
      job,
      token,
      signal,
      definition,
      ref,
      recordId: recordIdOf(scope, keyed.key),
      worker,
      ids: { ...base, scope, key: keyed.key, store: definition.storeName },
    };
    const fingerprint = definition.fingerprintOf(job);
    const jobKey = `${job.queueQualifiedName}:${job.id}`;
    const claim = await store.claim({
      ...ref,
      leaseMs: options.lease,
      fingerprint,
      jobId: job.id,
      jobKey,
      transactional: options.transactional,
    });
    if (worker) this.deps.waiting?.answered(attempt.recordId, worker, job.id!);
    // Owner tokens are per attempt, so a live record of this token is this attempt's own claim, applied once already:
    // the client sent it again after its connection dropped (ioredis resends unanswered commands). It holds the key.
    const own = !claim.claimed && claim.record.state === 'in_progress' && claim.record.owner === ref.owner;
    if (!claim.claimed && !own) return this.onHeld(attempt, claim, fingerprint);
    const takeover = claim.claimed ? claim.takeover : claim.record.attempts > 1;
    this.emit(attempt, { type: 'idempotencyClaimed', takeover });
    if (worker) this.deps.waiting?.holding(attempt.recordId, worker);

    const context = new AttemptContext(scope, ref.key, takeover);
    return context.run(job, () =>
      options.transactional
        ? this.runInTransaction(attempt, context, next).finally(() => this.settled(attempt))
        : this.runThenComplete(attempt, next, connection),
    );
  }

  /** The record is settled (or lost): the deliveries waiting for it run now. */
  private settled(attempt: Attempt): void {
    this.deps.waiting?.settled(attempt.recordId);
  }

  /**
   * Plain mode: the handler's effect lands wherever it writes, while the claim's lease is renewed; then the record is
   * completed. Renewing stops before the claim is settled, so a late renewal is not taken for a lost lease. When the
   * store can send the completion on the worker's `connection` (`IdempotencyStore.completeInOrder`), it lands
   * before BullMQ records the job completed and its answer is handled without holding the job.
   */
  private async runThenComplete(attempt: Attempt, next: Processor, connection: Redis | undefined): Promise<unknown> {
    const { job, token, signal, definition, ref } = attempt;
    const { store, options } = definition;
    const keeper = new LeaseKeeper(() => store.renew(ref, options.lease), options.lease, {
      lost: () =>
        this.leaseLost(attempt, 'its lease ended before it was renewed; another delivery may take the key over'),
      error: (error) => this.reportError(attempt, error),
    });
    let value: unknown;
    try {
      value = await next(job, token, signal);
    } catch (error) {
      keeper.stop();
      await this.afterFailure(attempt, error);
      this.settled(attempt);
      throw error;
    }
    keeper.stop();
    let result: string | undefined;
    try {
      result = serializeResult(value, ref);
    } catch (error) {
      await this.afterFailure(attempt, error);
      this.settled(attempt);
      throw error;
    }
    const completion = { result, ttlMs: definition.options.ttl };
    const inOrder = connection && definition.store.completeInOrder?.(connection, ref, completion);
    const settled = (inOrder ?? definition.store.complete(ref, completion))
      .then((completed) => this.afterCompletion(attempt, completed))
      .finally(() => this.settled(attempt));
    if (inOrder) settled.catch((error: unknown) => this.reportError(attempt, error));
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
      this.emit(attempt, { type: 'idempotencyCompleted' });
    } else {
      this.leaseLost(attempt, 'the handler finished after its claim was taken over, so its effect may have run twice');
    }
  }

  /** Transactional mode: the handler's writes and the completed record commit in one transaction of the store. */
  private async runInTransaction(attempt: Attempt, context: AttemptContext, next: Processor): Promise<unknown> {
    const { job, token, signal, definition, ref } = attempt;
    // No lease renewal: the store locks the record for its transaction (after checking it is still ours).
    try {
      const value = await definition.store.runInTransaction!(
        ref,
        (transaction) => {
          context.transaction = transaction;
          return next(job, token, signal);
        },
        (result) => ({ result: serializeResult(result, ref), ttlMs: definition.options.ttl }),
      );
      this.emit(attempt, { type: 'idempotencyCompleted' });
      return value;
    } catch (error) {
      if (error instanceof IdempotencyLeaseLostError) {
        this.leaseLost(
          attempt,
          'its claim was taken over before its transaction could lock the record; nothing was committed',
        );
      } else {
        // The store's connection dropped mid-transaction: say so (naming the store), then release as for any failure.
        if (error instanceof IdempotencyConnectionLostError) this.reportError(attempt, error);
        await this.afterFailure(attempt, error);
      }
      throw error;
    } finally {
      context.transaction = undefined;
    }
  }

  /** The key is held by a live record: replay it, wait for it, or refuse a different payload. */
  private async onHeld(
    attempt: Attempt,
    claim: Extract<IdempotencyClaimResult, { claimed: false }>,
    fingerprint: string | undefined,
  ): Promise<unknown> {
    const { record, expiresInMs } = claim;
    const { scope, key } = attempt.ref;
    if (fingerprint !== undefined && record.fingerprint !== undefined && fingerprint !== record.fingerprint) {
      this.emit(attempt, { type: 'idempotencyMismatch' });
      throw new IdempotencyKeyMismatchError(scope, key, fingerprint, record.fingerprint);
    }
    if (record.state === 'completed') {
      this.emit(attempt, { type: 'idempotencyReplayed', state: 'completed' });
      return record.result === undefined ? undefined : (JSON.parse(record.result) as unknown);
    }
    if (record.state === 'failed') {
      this.emit(attempt, { type: 'idempotencyReplayed', state: 'failed' });
      const stored = JSON.parse(record.error ?? '{}') as { name?: string; message?: string };
      throw new IdempotencyKeyFailedError(scope, key, stored.name ?? 'Error', stored.message ?? '');
    }
    const { job, token, definition } = attempt;
    const holderJobId = record.jobId;
    if (definition.options.onInProgress === 'fail') {
      this.emit(attempt, { type: 'idempotencyInProgress', action: 'failed', holderJobId, retryInMs: expiresInMs });
      throw new IdempotencyInProgressError(scope, key, holderJobId, expiresInMs);
    }
    // Back to delayed until the holder settles the record (it promotes this job then), or at the latest until its lease
    // could have ended (a holder that died); BullMQ does not count this as an attempt.
    const retryInMs = expiresInMs + DELAY_MARGIN_MS;
    const stillHeld = async () => {
      const now = await definition.store.get(scope, key);
      return now?.state === 'in_progress' && now.owner === record.owner;
    };
    if (this.deps.waiting && attempt.worker) {
      await this.deps.waiting.delay(job, token, attempt.recordId, retryInMs, attempt.worker, stillHeld);
    } else {
      await job.moveToDelayed(Date.now() + retryInMs, token);
    }
    this.emit(attempt, { type: 'idempotencyInProgress', action: 'delayed', holderJobId, retryInMs });
    throw new DelayedError(
      `Idempotency key "${key}" (scope "${scope}") is in progress in job ${holderJobId ?? '(unknown)'}: delayed ${retryInMs} ms`,
    );
  }

  /** The handler (or storing its result) failed: release the claim, or keep a final failure (`onFailure: 'keep'`). */
  private async afterFailure(attempt: Attempt, error: unknown): Promise<void> {
    const { job, definition, ref } = attempt;
    try {
      // A failure is kept only when BullMQ fails the job for good (asked of BullMQ, before it moves the job); and
      // always when the handler ended its transaction after writes that may be committed (so none runs them again).
      const keep =
        (error instanceof IdempotencyTransactionEndedError && error.outcome !== 'rolled back') ||
        (definition.options.onFailure === 'keep' &&
          !(error instanceof UnserializableIdempotencyResultError) &&
          (await attemptOutcome(job, error)) === 'fails');
      if (keep) {
        const { name, message } = error instanceof Error ? error : new Error(String(error));
        const failure = { error: JSON.stringify({ name, message }), ttlMs: definition.options.ttl };
        if (await definition.store.fail(ref, failure)) this.emit(attempt, { type: 'idempotencyFailureKept' });
      } else if (await definition.store.release(ref)) {
        this.emit(attempt, { type: 'idempotencyReleased' });
      }
    } catch (storeError) {
      // The claim stays until its lease ends; then the next delivery takes it over.
      this.reportError(attempt, storeError);
    }
  }

  private leaseLost(attempt: Attempt, what: string): void {
    const { scope, key, jobId } = attempt.ids;
    this.deps.logger.error(`Job ${jobId} lost its claim on idempotency key "${key}" (scope "${scope}"): ${what}`);
    this.emit(attempt, { type: 'idempotencyLeaseLost' });
  }

  private reportError(attempt: Attempt, error: unknown): void {
    const err = error instanceof Error ? error : new Error(String(error));
    const { queue, jobName, jobId, scope, key, store } = attempt.ids;
    this.deps.logger.error(`Idempotency store "${store}" failed for job ${jobId} (key "${key}"): ${err.message}`);
    this.deps.events.emit({ type: 'error', queue, jobName, jobId, scope, key, error: err });
  }

  private emit(attempt: Attempt, event: DistributiveOmit<IdempotencyEvent, 'at' | keyof Attempt['ids']>): void {
    this.deps.events.emit({ ...attempt.ids, ...event });
  }
}

/** Slack added to a holder's remaining lease before a waiting duplicate is tried again (clocks differ slightly). */
const DELAY_MARGIN_MS = 50;
