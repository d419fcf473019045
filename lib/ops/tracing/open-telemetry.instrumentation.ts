import type * as OpenTelemetry from '@opentelemetry/api';
import type { Attributes, Span } from '@opentelemetry/api';
import type { UniqueJobEvent } from '../../events/unique-job-event.interface.js';
import type {
  AnnotateOperation,
  JobInstrumentation,
  JobOperation,
  JobOperationAttributes,
} from '../../interfaces/job-instrumentation.interface.js';

/** The `@opentelemetry/api` module. */
export type OpenTelemetryApi = typeof OpenTelemetry;

/** Name of the library's tracer. */
export const TRACER_NAME = 'nestjs-unique-jobs';

/** Span names by operation. */
export const SPAN_NAMES: Readonly<Record<JobOperation, string>> = {
  enqueue: 'unique-jobs enqueue',
  enqueueBulk: 'unique-jobs enqueue bulk',
  process: 'unique-jobs process',
  runtimeLock: 'unique-jobs runtime lock',
  idempotency: 'unique-jobs idempotency',
};

/** Attribute names the spans carry. */
export const SPAN_ATTRIBUTES = {
  system: 'messaging.system',
  queue: 'messaging.destination.name',
  jobName: 'unique_jobs.job_name',
  lock: 'unique_jobs.lock',
  digest: 'unique_jobs.digest',
  jobs: 'unique_jobs.jobs',
  acquired: 'unique_jobs.lock.acquired',
  outcome: 'unique_jobs.outcome',
  strategy: 'unique_jobs.strategy',
  scope: 'unique_jobs.idempotency.scope',
  store: 'unique_jobs.idempotency.store',
  errorType: 'error.type',
} as const;

/** BullMQ errors that move a job rather than fail it: not span errors. */
const CONTROL_ERRORS = new Set(['DelayedError', 'WaitingChildrenError', 'WaitingError', 'RateLimitError']);

/** The span outcome an event sets (the last such event of a span wins). */
const OUTCOMES: Partial<Record<UniqueJobEvent['type'], string>> = {
  duplicate: 'duplicate',
  rejected: 'rejected',
  replaced: 'replaced',
  rescheduled: 'rescheduled',
  idempotencyReplayed: 'replayed',
  idempotencyInProgress: 'in_progress',
  idempotencyMismatch: 'mismatch',
  idempotencyMissingKey: 'missing_key',
};

/**
 * Spans with `@opentelemetry/api`: `unique-jobs enqueue` around the enqueue of a unique job (and `unique-jobs enqueue
 * bulk`), `unique-jobs process` around a guarded job, with children `unique-jobs runtime lock` (the wait for the
 * run-time lock) and `unique-jobs idempotency` (claim, handler, completion). Every library event becomes a span event
 * of the span in progress (`unique-jobs.locked`, …) and sets its attributes: digest, lock type, outcome, strategy,
 * queue, job name, idempotency scope and store. Never job data, idempotency keys, job ids or error messages (which may
 * quote a key): an error is recorded by its class name (`error.type`).
 */
export class OpenTelemetryInstrumentation implements JobInstrumentation {
  private readonly tracer: OpenTelemetry.Tracer;

  constructor(private readonly api: OpenTelemetryApi) {
    this.tracer = api.trace.getTracer(TRACER_NAME);
  }

  run<T>(
    operation: JobOperation,
    attributes: JobOperationAttributes,
    work: (annotate: AnnotateOperation) => Promise<T>,
  ): Promise<T> {
    return this.tracer.startActiveSpan(
      SPAN_NAMES[operation],
      {
        kind: this.api.SpanKind.INTERNAL,
        attributes: { [SPAN_ATTRIBUTES.system]: 'bullmq', ...toAttributes(attributes) },
      },
      async (span) => {
        try {
          return await work((more) => {
            if (span.isRecording()) span.setAttributes(toAttributes(more));
          });
        } catch (error) {
          this.recordError(span, error);
          throw error;
        } finally {
          span.end();
        }
      },
    );
  }

  /** Adds an event to the span in progress (the operation that published it). */
  annotate(event: UniqueJobEvent): void {
    const span = this.api.trace.getActiveSpan();
    if (!span?.isRecording()) return;
    const attributes = eventAttributes(event);
    span.addEvent(`unique-jobs.${event.type}`, attributes);
    const outcome =
      OUTCOMES[event.type] ?? (event.type === 'locked' && event.lock === 'enqueue' ? 'enqueued' : undefined);
    const kept: Attributes = {};
    for (const name of [
      SPAN_ATTRIBUTES.digest,
      SPAN_ATTRIBUTES.scope,
      SPAN_ATTRIBUTES.store,
      SPAN_ATTRIBUTES.strategy,
    ]) {
      if (attributes[name] !== undefined) kept[name] = attributes[name];
    }
    if (outcome !== undefined) kept[SPAN_ATTRIBUTES.outcome] = outcome;
    span.setAttributes(kept);
  }

  private recordError(span: Span, error: unknown): void {
    const type = error instanceof Error ? error.name : typeof error;
    if (CONTROL_ERRORS.has(type)) return;
    span.setAttribute(SPAN_ATTRIBUTES.errorType, type);
    span.setStatus({ code: this.api.SpanStatusCode.ERROR });
  }
}

function toAttributes(attributes: Partial<JobOperationAttributes>): Attributes {
  const result: Attributes = {};
  if (attributes.queue !== undefined) result[SPAN_ATTRIBUTES.queue] = attributes.queue;
  if (attributes.jobName !== undefined) result[SPAN_ATTRIBUTES.jobName] = attributes.jobName;
  if (attributes.lock !== undefined) result[SPAN_ATTRIBUTES.lock] = attributes.lock;
  if (attributes.digest !== undefined) result[SPAN_ATTRIBUTES.digest] = attributes.digest;
  if (attributes.jobs !== undefined) result[SPAN_ATTRIBUTES.jobs] = attributes.jobs;
  if (attributes.store !== undefined) result[SPAN_ATTRIBUTES.store] = attributes.store;
  if (attributes.acquired !== undefined) result[SPAN_ATTRIBUTES.acquired] = attributes.acquired;
  return result;
}

/** The attributes of an event that are safe to export: no data, keys, job ids or messages. */
function eventAttributes(event: UniqueJobEvent): Attributes {
  const result: Attributes = {};
  const set = (name: string, value: string | number | boolean | undefined) => {
    if (value !== undefined) result[name] = value;
  };
  if (event.type === 'reaped') {
    set('unique_jobs.reaped.kind', event.kind);
    set('unique_jobs.reaped.reason', event.reason);
    return result;
  }
  set(SPAN_ATTRIBUTES.queue, event.queue);
  set(SPAN_ATTRIBUTES.jobName, event.jobName);
  if ('digest' in event) set(SPAN_ATTRIBUTES.digest, event.digest);
  switch (event.type) {
    case 'locked':
      set('unique_jobs.lock.kind', event.lock);
      set('unique_jobs.lock.waited_ms', event.waitedMs);
      break;
    case 'unlocked':
      set('unique_jobs.lock.kind', event.lock);
      set('unique_jobs.lock.held_ms', event.heldMs);
      break;
    case 'duplicate':
      set(SPAN_ATTRIBUTES.strategy, event.strategy);
      set('unique_jobs.side', event.side);
      break;
    case 'rejected':
      set(SPAN_ATTRIBUTES.strategy, 'reject');
      set('unique_jobs.side', event.side);
      break;
    case 'replaced':
      set(SPAN_ATTRIBUTES.strategy, 'replace');
      break;
    case 'rescheduled':
      set(SPAN_ATTRIBUTES.strategy, 'reschedule');
      set('unique_jobs.reschedule.delay_ms', event.delay);
      set('unique_jobs.reschedule.count', event.reschedules);
      break;
    case 'error':
      set(SPAN_ATTRIBUTES.errorType, event.error.name);
      set(SPAN_ATTRIBUTES.scope, event.scope);
      break;
    case 'idempotencyMissingKey':
      set('unique_jobs.idempotency.action', event.action);
      break;
    case 'lockLost':
      break;
    default:
      set(SPAN_ATTRIBUTES.scope, event.scope);
      set(SPAN_ATTRIBUTES.store, event.store);
      if (event.type === 'idempotencyClaimed') set('unique_jobs.idempotency.takeover', event.takeover);
      if (event.type === 'idempotencyReplayed') set('unique_jobs.idempotency.state', event.state);
      if (event.type === 'idempotencyInProgress') set('unique_jobs.idempotency.action', event.action);
  }
  return result;
}
