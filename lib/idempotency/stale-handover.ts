import type { Attempt } from './attempt.js';
import type { IdempotencyRecord } from './idempotency-records.interface.js';
import { isHandedOver, resumeOwnerOf, settleParked } from './step-handover.js';
import type { WaitingDuplicates } from './waiting-duplicates.js';

/**
 * A delivery met `record` in progress, parked between two steps of its job (owned by the job's resume token: no
 * handler runs). When the job will not come back for it (removed without the library, its id given to a job created
 * since, or finished: failed for good and its worker's `failed` event never settled the record), the record is settled
 * as that event would have: kept failed with BullMQ's reason when the key keeps failures (`onFailure: 'keep'`) and
 * BullMQ holds the job failed, else released. Without this a SQL store's parked record held the key until its parked
 * lease ended, a day past the job's run time (the orphan reaper frees Redis records only). The job is read where the
 * record's mark says it lives (`ParkedRecordMarks`, written by the step that parked it): a record this Redis holds no
 * mark of (parked by a deployment on another Redis sharing the SQL store, or by a build before the marks) is left to
 * its lease. Resolves whether it was settled (a compare-and-set on the resume token: a record resumed or settled
 * meanwhile is left alone); once settled, the deliveries of the key `waiting` meanwhile are woken (see
 * `settleParked`). Two reads (the mark, then the job), only for a parked record; rejects when one fails.
 */
export async function settleStaleHandover(
  attempt: Attempt,
  record: IdempotencyRecord,
  waiting: WaitingDuplicates | undefined,
): Promise<boolean> {
  const { marks, definition } = attempt;
  const { owner } = record;
  if (!marks || owner === undefined || !isHandedOver(owner)) return false;
  const parker = await marks.parkerOf(owner);
  if (!parker) return false;
  // Its job, unless gone or its id given to a later job (another creation time, another token).
  const its = parker.standing !== 'gone' && resumeOwnerOf(parker.jobKey, parker.createdAt!) === owner;
  if (its && parker.standing === 'live') return false;
  const failed = its && parker.failedReason !== undefined ? { failedReason: parker.failedReason } : undefined;
  const { queue, jobName, jobId } = parker.mark;
  const report = attempt.report.of({ queue, jobName, jobId });
  return settleParked(definition, { ...attempt.ref, owner }, failed, report, { marks, waiting });
}
