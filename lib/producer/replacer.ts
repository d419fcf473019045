import { Job, type JobJson, type JobsOptions, type Queue } from 'bullmq';
import type { ClientConflict } from '../conflicts/conflict-strategy.interface.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { EnqueueLock } from '../locks/enqueue-lock.js';
import type { LockStore } from '../locks/lock-store.js';
import type { JobDefinitions } from '../options/job-definitions.js';
import { bullKeys, RESCHEDULES_FIELD, type UniqueJobsKeys } from '../redis/keys.js';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import type { GuardedQueues } from './guarded-queues.js';
import { lockedAs } from '../locks/locked-digest.js';
import { newJobId } from './job-ids.js';
import { takeEnqueueLock } from './take-enqueue-lock.js';

/** Holders taken over one after the other before `replace` gives up (other producers replacing the same digest). */
const MAX_REPLACEMENTS = 32;

/**
 * The `replace` strategy's tool: takes the place of the job holding a lock if that job never started. Producers
 * replacing one digest at once chain: each takes the place of the holder it meets, so every one of them either replaces
 * a live holder or reports the live holder that cannot be replaced.
 */
export class Replacer {
  constructor(
    private readonly definitions: JobDefinitions,
    private readonly queues: GuardedQueues,
    private readonly events: UniqueJobsEvents,
    private readonly store: LockStore,
    private readonly keys: UniqueJobsKeys,
  ) {}

  /**
   * Removes the holder if it never started (waiting, delayed or prioritized, no attempt begun but reschedules) and adds
   * the job in its place, with the lock; `undefined` when the holder is running, finished, waiting for a retry or in another queue.
   */
  async replace(conflict: ClientConflict): Promise<EnqueueResult | undefined> {
    const { queue, digest, name, data, opts } = conflict;
    const definition = this.definitions.find(queue.name, name);
    const lock = definition?.enqueueLock;
    if (!definition || !lock) return undefined;
    // A caller's jobId that holds the lock itself (an until_expired period or a lock across queues, outliving its job)
    // refuses the add whatever is replaced: replace nothing (found by the model test: a holder was removed, its period
    // released, and the new job refused all the same).
    if (await callerIdHolds(lock, conflict)) return undefined;
    // A job BullMQ refuses before sending anything (options it rejects, data it cannot serialize) must not cost the
    // holder its place (removed, then the add refused): BullMQ's own checks first.
    checkAsBullMQAdds(queue, name, data, opts);
    let holder = conflict.existingJobId;
    // The holders this call removed, each reported by one call only (producers removing one holder at once all see
    // BullMQ answer that it is removed: the one that takes the job's report key reports it).
    const replaced: string[] = [];
    const kept = new Set<string>(); // holders met that started or finished: they stay
    // The bound is on removals: a lock seen free is tried once more past it (else a call that ran out with the lock
    // free would name no job in the place of those it removed).
    for (let attempt = 0; attempt < 2 * MAX_REPLACEMENTS; attempt++) {
      if (holder !== undefined) {
        if (attempt >= MAX_REPLACEMENTS) break;
        const removed = await this.removeIfNotStarted(queue, holder, digest, () => this.checkBeforeRemoving(conflict));
        // A holder of a lock that outlives its job (an until_expired period) that ran meanwhile keeps its period: BullMQ
        // removed its record, not the run (freeing the period would let the new job run twice in it).
        const ranInPeriod = removed === 'ran' && definition.lock.outlivesJob;
        if (!ranInPeriod && (removed === 'removed' || removed === 'removedByAnother' || removed === 'ran')) {
          await lock.forget(queue, digest, holder); // its hold, in a slot set (BullMQ deletes a deduplication key itself)
          if (removed === 'removed') replaced.push(holder);
        } else {
          // Started, finished, or not found in this queue: it stays. Another holder of the lock (lockLimit > 1, or the
          // lock changed hands meanwhile: another producer replaced it, or it started and gave the lock up) may be one
          // that never started; with none left to try, there is nothing to replace.
          // 'foreign': the id of a hold that outlived its job (removed behind the library's back) now names a job of
          // another digest (a caller's jobId), never this lock's to remove; the reaper frees that hold.
          if (removed === 'kept' || removed === 'foreign' || ranInPeriod) kept.add(holder);
          const live = await lock.holders(queue, digest);
          if (live.length > 0 && live.every((id) => kept.has(id) || id === holder)) {
            this.reportReplaced(definition.queue, name, digest, replaced, live.includes(holder) ? holder : live[0]);
            return undefined;
          }
          holder = live.find((id) => !kept.has(id) && id !== holder);
          continue;
        }
      }
      const { add } = this.queues.originals(queue);
      const jobId = opts.jobId ?? newJobId();
      const request = { queue, name, data, opts, digest, jobId, reported: this.events.observes('locked') };
      const taken = await takeEnqueueLock(definition, request, add, this.events);
      if ('job' in taken) {
        this.reportReplaced(definition.queue, name, digest, replaced, jobId);
        const replacedJobId = replaced.at(-1);
        return {
          status: 'enqueued',
          job: taken.job,
          digest,
          ...(replacedJobId === undefined ? {} : { replacedJobId }),
        };
      }
      holder = taken.existingJobId; // another producer got in between: replace that one
    }
    if (holder !== undefined) this.reportReplaced(definition.queue, name, digest, replaced, holder);
    return undefined;
  }

  /**
   * What must hold before a holder is removed, else the add that follows would fail with the holder gone: the new job's
   * parent exists, and Redis takes writes (a full Redis, `noeviction`, refuses the add: it refuses the probe first, and
   * the holder stays; Redis' own OOM error).
   */
  private async checkBeforeRemoving(conflict: ClientConflict): Promise<void> {
    const { queue, digest } = conflict;
    await Promise.all([
      this.requireParent(conflict),
      // Where the new job and a deduplication key go (on a Cluster, the queue's slot), and a slot set's lock.
      this.store.requireWritable(bullKeys.writeProbe(queue.qualifiedName)),
      this.store.requireWritable(this.keys.writeProbe(digest)),
    ]);
  }

  /**
   * Throws when the new job names a parent that does not exist: BullMQ refuses such a job only inside its add script,
   * after a holder would be removed. Asked before each removal (a parent may be removed meanwhile).
   */
  private async requireParent({ queue, name, opts: { parent } }: ClientConflict): Promise<void> {
    if (!parent || (await this.store.jobs.exists(bullKeys.job(parent.queue, parent.id)))) return;
    throw new UniqueJobsError(
      `Job "${name}" on queue "${queue.name}" names parent job ${parent.id} of ${parent.queue}, which does not exist: BullMQ refuses it; replace removed nothing`,
    );
  }

  /**
   * A `replaced` event for each holder this call removed (every one, not only the last: other producers may take the
   * lock between a removal and the add), naming the job in their place: this call's own, or, when it gives up, the
   * holder that stays (another producer's job, which took the freed lock).
   */
  private reportReplaced(queue: string, jobName: string, digest: string, removed: string[], jobId: string): void {
    for (const replacedJobId of removed) {
      this.events.emit({ type: 'replaced', queue, jobName, digest, jobId, replacedJobId });
    }
  }

  /**
   * Removes a job of this queue and this digest that never started. `'removed'`: this call removed it;
   * `'removedByAnother'`: it is gone, another caller removing it at the same time (it reports it), or it was removed as
   * it ended; `'ran'`: it started between the check and the removal, and ended or went back to wait for a retry
   * (BullMQ removes such a job too), so it was not replaced; `'gone'`: it no longer exists; `'kept'`: it started or
   * finished, or is a flow child or parent; `'foreign'`: a job of another digest (or none) has that id.
   */
  private async removeIfNotStarted(
    queue: Queue,
    jobId: string,
    digest: string,
    beforeRemoving: () => Promise<void>,
  ): Promise<'removed' | 'removedByAnother' | 'ran' | 'gone' | 'kept' | 'foreign'> {
    // The state checked below may be gone by the removal: a worker may take the job and run it meanwhile (to its end,
    // or back to waiting or delayed for a retry), and BullMQ removes such a job as it removes one that never started.
    // The queue's event stream past this entry tells: an `active` event of the job, or its removal's `prev` state. Read
    // beside the job (both answered before its state is asked): one round trip, not two.
    const events = bullKeys.events(queue.qualifiedName);
    const [first, job] = await Promise.all([this.store.jobs.lastEventId(events), Job.fromId(queue, jobId)]);
    if (!job) return 'gone';
    if (lockedAs(job)?.digest !== digest) return 'foreign';
    // A flow child: removing it takes it out of its parent's dependencies, and BullMQ then runs the parent without it
    // (the replacement is no child of that parent).
    if (job.parentKey !== undefined) return 'kept';
    const since = await this.neverRan(queue, job, events, first);
    if (since === false) return 'kept';
    // A flow parent (children added with `parent` naming it): BullMQ's removal takes its children with it, jobs of
    // their own that the replacement does not carry (they would be lost, nothing in the dead set). Asked beside the
    // state: one round trip.
    const [state, children] = await Promise.all([job.getState(), job.getDependenciesCount()]);
    if (Object.values(children).some((count) => count > 0)) return 'kept';
    if (state !== 'waiting' && state !== 'delayed' && state !== 'prioritized')
      return state === 'unknown' ? 'gone' : 'kept';
    await beforeRemoving();
    if ((await queue.remove(jobId)) === 1) {
      const prev = await this.store.jobs.removedFrom(events, since, jobId);
      if (prev !== undefined && STARTED.has(prev)) return 'ran'; // it ran: not replaced
      // Nothing removed by this call (it was gone already: removed by another caller, which reports it, or as it ended).
      if (prev === undefined) return 'removedByAnother';
      // Answered `1` also when another producer removed it a moment before: the caller that takes the job's report key
      // reports it (taken only after a removal was answered, so a caller that died before removing blocks nobody).
      const report = this.keys.removalReport(queue.qualifiedName, jobId, job.timestamp);
      return (await this.store.takeOnce(report, REPORT_MS)) ? 'removed' : 'removedByAnother';
    }
    return (await Job.fromId(queue, jobId)) ? 'kept' : 'gone'; // it became active meanwhile, or someone removed it
  }

  /**
   * Whether no handler ever ran the job: no attempt begun, or every start it had was put back by the `reschedule`
   * strategy before its handler (an `until_and_while_executing` copy that met the run-time lock keeps its enqueue lock
   * and never ran: the latest payload replaces it). A start that stalled, was put back at a worker's close or ran a step
   * is no reschedule, so such a job counts as started; one read more, only for a job with starts. Resolves `false`
   * when it may have run, else the entry of the queue's event stream past which a start of the job is one after this
   * check: `since` (read with the job) for a job with no start; for one with starts, the stream's last entry read at
   * once with its starts and reschedules (a copy rescheduled once more since the job was read has one of each more:
   * compared with the starts read before, it counted as started, and its `active` event past `since` as a run, so the
   * newest payload was refused, or the copy removed without a word of it).
   */
  private async neverRan(
    queue: Queue,
    job: Job,
    events: string,
    since: string | undefined,
  ): Promise<string | undefined | false> {
    if (job.attemptsStarted === 0) return since;
    if (job.attemptsMade > 0) return false;
    const now = await this.store.jobs.countsAt(events, bullKeys.job(queue.qualifiedName, job.id!), [
      'ats',
      'atm',
      RESCHEDULES_FIELD,
    ]);
    const [started, made, reschedules] = now.counts;
    return made === 0 && reschedules === started ? now.since : false;
  }
}

/**
 * The checks BullMQ makes of a new job before it sends anything, made by BullMQ's own code without adding the job: the
 * queue's `Job` class builds it (with the queue's default options, as `queue.add` merges them), serializes it
 * (`asJSON`: data that `JSON.stringify` refuses) and validates its options (`validateOptions`: a float priority, a
 * size limit, exclusive parent options, a custom id BullMQ refuses). One rule sits in `Queue.addJob` instead of the
 * `Job` class, and is repeated here: an id `'0'` or starting with `'0:'`. Throws BullMQ's error. One more is BullMQ's
 * add script's, which stores the options as JSON and refuses a NaN or infinite number among them (`delay: NaN`,
 * `attempts: Infinity`): refused here, naming the option (else the holder would be removed, then the add refused).
 */
export function checkAsBullMQAdds(queue: Queue, name: string, data: unknown, opts: JobsOptions): void {
  const { jobId } = opts;
  if (jobId === '0' || jobId?.startsWith('0:')) throw new Error("JobId cannot be '0' or start with '0:'");
  const JobClass = (queue as unknown as { Job: typeof Job }).Job;
  const job = new JobClass(queue, name, data, { ...queue.jobsOpts, ...opts }, jobId);
  (job as unknown as { validateOptions(json: JobJson): void }).validateOptions(job.asJSON());
  const path = nonFinitePath(job.opts, 'opts', 0);
  if (path !== undefined) {
    throw new UniqueJobsError(
      `Job "${name}" on queue "${queue.name}": ${path} is not a finite number, which BullMQ's add refuses (Redis cannot store it as JSON); replace removed nothing`,
    );
  }
}

/** Where a NaN or infinite number sits in job options (`opts.backoff.delay`), if anywhere (plain values, 8 deep). */
function nonFinitePath(value: unknown, path: string, depth: number): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : path;
  if (typeof value !== 'object' || value === null || depth >= 8) return undefined;
  for (const [key, item] of Object.entries(value)) {
    const found = nonFinitePath(item, `${path}.${key}`, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Whether the caller's own `jobId` holds the lock of the conflict (a hold that outlives its job: an until_expired
 * period, a lock across queues): the add is refused by it whatever else is replaced.
 */
export async function callerIdHolds(lock: EnqueueLock, { queue, digest, opts }: ClientConflict): Promise<boolean> {
  return opts.jobId !== undefined && (await lock.holders(queue, digest)).includes(opts.jobId);
}

/** The states of BullMQ's `removed` event (`prev`) of a job that had started: it was not replaced. */
const STARTED: ReadonlySet<string> = new Set(['active', 'completed', 'failed', 'waiting-children']);

/** How long a removed job's report key lives: longer than producers removing the same job at once can be apart. */
const REPORT_MS = 10_000;
