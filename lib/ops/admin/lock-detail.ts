import { Job, type Queue } from 'bullmq';
import type { DeadSetService } from '../../dead-set/dead-set.service.js';
import type { DeadSetEntry } from '../../dead-set/dead-set-entry.interface.js';
import { MAX_OWNERS_PER_LOCK } from '../inspection/held-lock-reader.js';
import type { LockInspector } from '../inspection/lock-inspector.js';
import type { AdminJobEvent, AdminJobView, AdminLockDetail } from './interfaces/admin-views.interface.js';

/** Newest dead-set entries searched for the rejected duplicates of one lock. */
export const DEAD_SET_SEARCH = 2000;
/** Dead-set entries read per call of that search (each parsed on the event loop: a short step each). */
const DEAD_SET_STEP = 100;
/** Log lines read per owner job. */
const LOG_LINES = 50;
/** Owner jobs of one digest loaded whole (job, state, logs) at most: the others are counted. */
export const MAX_OWNER_JOBS = MAX_OWNERS_PER_LOCK;
/** Rejected duplicates of one digest a lock's answer lists by default. */
export const DEFAULT_REJECTED = 20;
/** Most rejected duplicates a lock's answer lists (`api/locks/:digest?limit=`). */
export const MAX_REJECTED = 100;

/** An owner job of a digest, before it is loaded. */
interface OwnerJob {
  id: string;
  queue: string | undefined;
  found: boolean;
  queueTag?: string;
}

/**
 * What the admin shows of one digest, in bounded work whatever the data: its keys (at most 20 owners each, from the
 * inspector), at most {@link MAX_OWNER_JOBS} owner jobs loaded with their history and last log lines, and the newest
 * `limit` of the duplicates rejected under it with how many the newest {@link DEAD_SET_SEARCH} dead-set entries hold.
 */
export class LockDetailReader {
  constructor(
    private readonly inspector: LockInspector,
    private readonly queues: ReadonlyMap<string, Queue>,
    private readonly deadSet: DeadSetService,
  ) {}

  /** Everything about one (validated) digest; `rejectedLimit` rejected duplicates listed at most. */
  async read(digest: string, rejectedLimit: number): Promise<AdminLockDetail> {
    const [locks, rejected] = await Promise.all([
      this.inspector.showLock(digest),
      this.rejectedUnder(digest, rejectedLimit),
    ]);
    // Each owner's job, in the queue the inspector found it in. One it found in none (`missing`) is not looked up
    // again: it searched the admin's queues (a run-time lock's owner: the queue the owner names, when it knows it), and
    // another queue's job with that id is not the owner.
    // One that names a queue the inspector does not know keeps that queue's tag: its job may be alive there.
    // Owners are told apart by queue and id: a lock across queues can be held by two jobs with the same (caller) id.
    const owners = new Map<string, OwnerJob>();
    let moreOwners = 0;
    for (const lock of locks) {
      moreOwners += lock.moreOwners ?? 0;
      for (const owner of lock.owners) {
        const queue = owner.queue ?? (lock.storage === 'deduplication' ? lock.queue : undefined);
        const job: OwnerJob = {
          id: owner.jobId,
          queue,
          found: owner.queue !== undefined,
          ...(owner.queueTag === undefined ? {} : { queueTag: owner.queueTag }),
        };
        const key = JSON.stringify([queue ?? null, owner.queueTag ?? null, owner.jobId]);
        if (!owners.get(key)?.found) owners.set(key, job);
      }
    }
    // An owner named by id alone (no queue, no tag) that another lock's owner of that id was found for is that job.
    const foundIds = new Set([...owners.values()].filter((job) => job.found).map((job) => job.id));
    const unique = [...owners.values()].filter(
      (job) => job.found || job.queue !== undefined || job.queueTag !== undefined || !foundIds.has(job.id),
    );
    const loaded = unique.slice(0, MAX_OWNER_JOBS);
    moreOwners += unique.length - loaded.length;
    const jobs = await Promise.all(
      loaded.map(async ({ id, queue, found, queueTag }) =>
        found
          ? this.jobView(id, queue)
          : { queue, id, found: false, ...(queueTag === undefined ? {} : { queueTag }), timeline: [], logs: [] },
      ),
    );
    return { digest, locks, jobs, ...(moreOwners > 0 ? { moreOwners } : {}), ...rejected };
  }

  private async jobView(id: string, queueName: string | undefined): Promise<AdminJobView> {
    const candidates = queueName !== undefined ? [this.queues.get(queueName)] : [...this.queues.values()];
    for (const queue of candidates) {
      if (!queue) continue;
      const job = await Job.fromId(queue, id);
      if (!job) continue;
      const [state, logs] = await Promise.all([job.getState(), queue.getJobLogs(id, -LOG_LINES, -1)]);
      return {
        queue: queue.name,
        id,
        found: true,
        name: job.name,
        state,
        data: job.data as unknown,
        opts: job.opts,
        attemptsMade: job.attemptsMade,
        ...(job.failedReason ? { failedReason: job.failedReason } : {}),
        ...(job.returnvalue !== undefined && job.returnvalue !== null
          ? { returnValue: job.returnvalue as unknown }
          : {}),
        timeline: timelineOf(job, state),
        logs: logs.logs,
      };
    }
    return { queue: queueName, id, found: false, timeline: [], logs: [] };
  }

  /**
   * The newest `limit` entries of `digest` among the newest {@link DEAD_SET_SEARCH} of the dead set, how many of them
   * are of `digest`, and how many were searched. Entries of other digests are dropped as each step is read.
   */
  private async rejectedUnder(
    digest: string,
    limit: number,
  ): Promise<Pick<AdminLockDetail, 'rejected' | 'rejectedTotal' | 'rejectedSearched'>> {
    const rejected: DeadSetEntry[] = [];
    let rejectedTotal = 0;
    let rejectedSearched = 0;
    while (rejectedSearched < DEAD_SET_SEARCH) {
      const step = Math.min(DEAD_SET_STEP, DEAD_SET_SEARCH - rejectedSearched);
      const entries = await this.deadSet.list({ offset: rejectedSearched, limit: step });
      rejectedSearched += entries.length;
      for (const entry of entries) {
        if (entry.digest !== digest) continue;
        rejectedTotal++;
        if (rejected.length < limit) rejected.push(entry);
      }
      if (entries.length < step) break;
    }
    return { rejected, rejectedTotal, rejectedSearched };
  }
}

function timelineOf(job: Job<unknown, unknown>, state: string): AdminJobEvent[] {
  const events: AdminJobEvent[] = [{ at: job.timestamp, event: 'added' }];
  if (job.delay > 0) events.push({ at: job.timestamp + job.delay, event: 'delayed until' });
  if (job.processedOn) {
    events.push({ at: job.processedOn, event: 'started', detail: `attempt ${job.attemptsStarted || 1}` });
  }
  if (job.finishedOn) {
    events.push({
      at: job.finishedOn,
      event: state === 'failed' ? 'failed' : 'completed',
      ...(state === 'failed' && job.failedReason ? { detail: job.failedReason } : {}),
    });
  }
  return events.sort((a, b) => a.at - b.at);
}
