import type { Job } from 'bullmq';
import type { LoggerLike } from '../common/logger.js';
import type { DistributiveOmit, IdempotencyEvent } from '../events/unique-job-event.interface.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { ResolvedIdempotency } from './idempotency-definitions.js';
import type { IdempotencyRecordRef } from './idempotency-store.interface.js';
import type { WorkerLike } from './waiting-duplicates.js';
import type { ParkedRecordMarks } from '../redis/parked-record-marks.js';
import { asError } from '../errors/thrown.js';

/** What every event and message of one attempt names. */
export interface AttemptIds {
  queue: string;
  jobName: string;
  jobId: string;
  scope: string;
  key: string;
  store: string;
}

/** One delivery of a job under `@IdempotencyKey`, from its claim to its settling. */
export interface Attempt {
  job: Job<unknown, unknown>;
  token: string | undefined;
  signal: AbortSignal | undefined;
  definition: ResolvedIdempotency;
  ref: IdempotencyRecordRef;
  /** The record's hashed id (what waiting deliveries name it by). */
  recordId: string;
  /** The worker running the job (what promotes the deliveries waiting for its key). */
  worker: WorkerLike | undefined;
  /** Where step jobs whose records are parked live (see `ParkedRecordMarks`), when the library keeps them. */
  marks: ParkedRecordMarks | undefined;
  /** Says what happened to the attempt: events and log lines naming it. */
  report: AttemptReport;
  /** The claim continues a later step of a step job (resumed a handover, or took a crashed later step over). */
  resumed?: boolean;
}

/** The events and log lines of one attempt. */
export class AttemptReport {
  constructor(
    private readonly events: UniqueJobsEvents,
    private readonly logger: LoggerLike,
    private readonly ids: AttemptIds,
  ) {}

  emit(event: DistributiveOmit<IdempotencyEvent, 'at' | keyof AttemptIds>): void {
    if (this.events.observes(event.type)) this.events.emit({ ...this.ids, ...event });
  }

  /** The report of another job of the same key (the holder this attempt settled for, maybe of another queue). */
  of(job: { queue: string; jobName: string; jobId: string }): AttemptReport {
    return new AttemptReport(this.events, this.logger, { ...this.ids, ...job });
  }

  /** The attempt lost its claim: `what` says how, and what may follow. */
  leaseLost(what: string): void {
    const { scope, key, jobId } = this.ids;
    this.logger.error(`Job ${jobId} lost its claim on idempotency key "${key}" (scope "${scope}"): ${what}`);
    this.emit({ type: 'idempotencyLeaseLost' });
  }

  /** The lease keeper found the claim's lease ended before a renewal (its report of a lost lease). */
  lost(): void {
    this.leaseLost('its lease ended before it was renewed; another delivery may take the key over');
  }

  /** The handler's result was larger than `maxResultBytes`: the record completes without it. */
  resultOmitted(bytes: number, maxBytes: number): void {
    const { scope, key, jobId } = this.ids;
    this.logger.warn(
      `Job ${jobId}'s result (${bytes} bytes of JSON) is larger than maxResultBytes (${maxBytes}): idempotency key "${key}" (scope "${scope}") is recorded completed without it, so later deliveries of the key replay undefined`,
    );
  }

  /** The store failed under the attempt (`what`: what failed instead, e.g. the library's Redis). */
  error(error: unknown, what = `Idempotency store "${this.ids.store}"`): void {
    const err = asError(error);
    const { queue, jobName, jobId, scope, key } = this.ids;
    this.logger.error(`${what} failed for job ${jobId} (key "${key}"): ${err.message}`);
    this.events.emit({ type: 'error', queue, jobName, jobId, scope, key, error: err });
  }

  /** The library's Redis failed to write or remove the mark of a record parked for a step job (`ParkedRecordMarks`). */
  markError(error: unknown): void {
    this.error(error, "The parked record's mark in the library's Redis");
  }
}
