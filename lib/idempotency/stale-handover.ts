import { describeThrown } from '../errors/thrown.js';
import type { BullJobReads } from '../redis/bull-job-reads.js';
import { bullKeys } from '../redis/keys.js';
import type { Attempt } from './attempt.js';
import type { IdempotencyRecord } from './idempotency-records.interface.js';
import { isHandedOver, resumeOwnerOf } from './step-handover.js';

/** Why a handed-over record's job will not come back for it. */
type StaleParker = 'gone' | 'finished' | 'another';

/**
 * A delivery met `record` in progress, parked between two steps of its job (owned by the job's resume token: no
 * handler runs), and its key's scope is its queue's own (the default `'<queue>:<job name>'`): the parked job, if any,
 * is the job of the record's id in this queue. When that job will not come back for the record (removed without the
 * library, its id given to a job created since, or finished: failed for good and its worker's `failed` event never
 * settled the record), the record is settled as that event would have: kept failed with BullMQ's reason when the key
 * keeps failures (`onFailure: 'keep'`) and the job failed, else released. Without this a SQL store's parked record held
 * the key until its parked lease ended, a day past the job's run time (the orphan reaper frees Redis records only).
 * Resolves whether it was settled (a compare-and-set on the resume token: a record resumed or settled meanwhile is left
 * alone). One HMGET of the job's hash, only for such a record; a record of an explicit scope is left (its job may live in
 * any queue sharing the scope). Rejects when the read or the store call fails.
 */
export async function settleStaleHandover(
  attempt: Attempt,
  record: IdempotencyRecord,
  jobs: BullJobReads,
): Promise<boolean> {
  const { definition, job } = attempt;
  const { owner, jobId } = record;
  if (!definition.queueScoped || owner === undefined || jobId === undefined || !isHandedOver(owner)) return false;
  const jobKey = bullKeys.job(job.queueQualifiedName, jobId);
  const { standing, createdAt, failedReason } = await jobs.record(jobKey);
  const stale: StaleParker | undefined =
    standing === 'gone'
      ? 'gone'
      : resumeOwnerOf(jobKey, createdAt!) !== owner
        ? 'another'
        : standing === 'finished'
          ? 'finished'
          : undefined;
  if (stale === undefined) return false;
  const { store, options } = definition;
  const ref = { ...attempt.ref, owner };
  const report = attempt.report.of(jobId);
  if (stale === 'finished' && failedReason !== undefined && options.onFailure === 'keep') {
    const error = JSON.stringify(describeThrown({ name: 'Error', message: failedReason }));
    if (!(await store.fail(ref, { error, ttlMs: options.ttl }))) return false;
    report.emit({ type: 'idempotencyFailureKept' });
    return true;
  }
  if (!(await store.release(ref))) return false;
  report.emit({ type: 'idempotencyReleased' });
  return true;
}
