/** The operations the job interceptor reports to an instrumentation (tracing). */
export type JobOperation = 'enqueue' | 'enqueueBulk' | 'process' | 'runtimeLock' | 'idempotency';

/**
 * What an operation is known by. Never user data: no job data, no idempotency key, no job id (a producer may choose
 * ids that embed data). The digest is a hash.
 */
export interface JobOperationAttributes {
  /** Name of the queue. */
  queue: string;
  /** The job's name (absent for a bulk enqueue, whose jobs may have several). */
  jobName?: string;
  /** The lock type (`until_executed`, …). */
  lock?: string;
  /** The job's digest (`v1:` + 64 hex digits), when it is a unique job. */
  digest?: string;
  /** Jobs in a bulk enqueue. */
  jobs?: number;
  /** Idempotency store name. */
  store?: string;
  /** Run-time lock: whether it was acquired. */
  acquired?: boolean;
}

/** Adds attributes to the operation in progress. */
export type AnnotateOperation = (attributes: Partial<JobOperationAttributes>) => void;

/**
 * Wraps the interceptor's operations (set with `JobInterceptor#instrument`; the tracing provider installs one when
 * `@opentelemetry/api` is present). `work` must be called exactly once and its result returned.
 */
export interface JobInstrumentation {
  /**
   * Runs `work` as `operation` (e.g. inside a span named after it, with these attributes) and returns what it resolves
   * to, or rejects with what it rejects with; `annotate` adds attributes learnt while it runs.
   */
  run<T>(
    operation: JobOperation,
    attributes: JobOperationAttributes,
    work: (annotate: AnnotateOperation) => Promise<T>,
  ): Promise<T>;
}
