import { randomUUID } from 'node:crypto';
import type { Job } from 'bullmq';
import type { LoggerLike } from '../common/logger.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { bullKeys } from '../redis/keys.js';
import type { ParkedRecordMarks } from '../redis/parked-record-marks.js';
import { AttemptReport, type Attempt } from './attempt.js';
import type { ResolvedIdempotency } from './idempotency-definitions.js';
import type { IdempotencyTransactionalClaim } from './idempotency-store.interface.js';
import { resumeOwnerFor } from './step-handover.js';
import { recordIdOf } from './stored-key.js';
import type { WorkerLike } from './waiting-duplicates.js';

/**
 * A delivery of `job` starts its attempt at `key`: the attempt, under an owner token of its own, and the claim it makes
 * (in plain or transactional mode).
 */
export function startAttempt(
  definition: ResolvedIdempotency,
  key: string,
  job: Job<unknown, unknown>,
  token: string | undefined,
  signal: AbortSignal | undefined,
  worker: WorkerLike | undefined,
  deps: { events: UniqueJobsEvents; logger: LoggerLike; parkedRecords?: ParkedRecordMarks },
): { attempt: Attempt; request: IdempotencyTransactionalClaim } {
  const { options } = definition;
  const scope = definition.scopeOf(job);
  const owner = randomUUID();
  // Object literals, not spreads: this runs once per job, and a spread copies through a slower path (CPU profile of
  // the worker bench: the spreads here were ~8 µs a job).
  const attempt: Attempt = {
    job,
    token,
    signal,
    definition,
    ref: { scope, key, owner },
    recordId: recordIdOf(scope, key),
    worker,
    marks: deps.parkedRecords,
    report: new AttemptReport(deps.events, deps.logger, {
      queue: job.queueName,
      jobName: job.name,
      jobId: job.id!,
      scope,
      key,
      store: definition.storeName,
    }),
  };
  const fingerprint = definition.fingerprintOf(job);
  const jobKey = bullKeys.job(job.queueQualifiedName, job.id!);
  // Where a step of the job hands its claim over to (a store that can hand over: see step-handover.ts).
  const resumeOwner = resumeOwnerFor(definition, job, jobKey);
  const request = {
    scope,
    key,
    owner,
    leaseMs: options.lease,
    fingerprint,
    jobId: job.id,
    jobKey,
    jobCreatedAt: job.timestamp,
    ttlMs: options.ttl,
    resumeOwner,
  };
  return { attempt, request };
}
