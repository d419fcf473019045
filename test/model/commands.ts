// The commands of the model test: what producers, handlers, operators and crashes do to the jobs of a sequence. Each
// runs against the real system, then waits until it settled and checks every invariant (invariants.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import type { Job, JobsOptions } from 'bullmq';
import { DuplicateJobError } from '../../lib/index.js';
import { DISABLED, LONG } from './configs.js';
import {
  checkRuns,
  checkState,
  enqueueLockOf,
  judgeAnswer,
  stepHolders,
  type Answer,
  type StepHolders,
} from './invariants.js';
import { DIGESTS, type Model, type Violation } from './model.js';
import { ACTIONS, type Action, type LockSnapshot, type ModelJobData, type System } from './system.js';

type ModelCommand = fc.AsyncCommand<Model, System>;

/** An error as the step log shows it. */
const describeError = (error: unknown) =>
  error instanceof Error ? `${error.name}: ${error.message}` : JSON.stringify(error);

/** A model invariant broken: the message is the whole report (step log, jobs, lock keys, runs). */
export class ModelViolation extends Error {
  override name = 'ModelViolation';
}

interface StepOptions {
  /** The step removes jobs by hand: jobs gone after it count as removed (the general path keeps their slots). */
  removing?: boolean;
  /** Jobs removed in the step give their general-path slots back at once (`job.remove()` through a guarded queue). */
  releasing?: boolean;
  /** Checks that need the settled states (e.g. a refused retry left the job where it was). */
  after?: () => Violation[];
}

/** What the run did (printed with MODEL_STATS=1): steps per command kind. */
export const STATS = { sequences: 0, steps: 0, byKind: new Map<string, number>() };

/** Runs one step: acts, logs the outcome, waits until the system settled and checks every invariant. */
export async function step(m: Model, label: string, act: () => Promise<string>, options: StepOptions = {}) {
  m.step += 1;
  STATS.steps += 1;
  const kind = label
    .split(/[:([#]/)[0]
    .replace(/ of .*$/, '')
    .trim();
  STATS.byKind.set(kind, (STATS.byKind.get(kind) ?? 0) + 1);
  m.removing = options.removing ?? false;
  m.releasing = options.releasing ?? false;
  let outcome: string;
  try {
    outcome = await act();
  } catch (error) {
    m.log.push(`${m.step}. ${label} → threw ${describeError(error)}`);
    throw error;
  }
  m.log.push(`${m.step}. ${label} → ${outcome}`);
  const before = new Map(m.current().map((job) => [job, job.state]));
  const line = m.log.length - 1;
  // The log line also shows where the step moved the jobs (written once the system settled).
  const annotate = () => {
    const moved = m.current().filter((job) => before.get(job) !== job.state);
    if (moved.length) m.log[line] = `${m.log[line]} ⇒ ${moved.map((job) => `${job.id} ${job.state}`).join(', ')}`;
  };
  await settleAndCheck(m, options.after, annotate);
}

/**
 * Settles and checks the invariants. A violation of the lock state is confirmed by settling and looking again (three
 * times, 40 to 120 ms apart) before it is reported: only a state the system stays in counts, never one a loaded machine
 * caught mid-write.
 */
export async function settleAndCheck(m: Model, after?: () => Violation[], settled?: () => void): Promise<void> {
  const s = m.system;
  let violations: Violation[] = [];
  let locks: LockSnapshot[] = [];
  for (let attempt = 0; attempt < 4; attempt++) {
    if (attempt > 0) await sleep(40 * attempt);
    m.update(await s.settle(m.seq, m.config.queue, m.ids()));
    if (attempt === 0) settled?.();
    locks = await s.snapshotLocks(m.digestKeys);
    m.lockHolders = locks.map((lock) => enqueueLockOf(m, lock).holders);
    violations = [...checkState(m, locks), ...checkRuns(m), ...(after?.() ?? [])];
    if (violations.length === 0) break;
  }
  violations.unshift(...m.found.splice(0));
  if (violations.length > 0) throw new ModelViolation(report(m, violations, locks));
}

/** The failure report of a sequence. */
export function report(m: Model, violations: readonly Violation[], locks: readonly LockSnapshot[]): string {
  const runs = m.system.runs
    .filter((run) => run.seq === m.seq)
    .map(
      (run) =>
        `run ${run.no}: job ${run.jobId} (${run.key}) attempt ${run.attemptsStarted} ${run.status}${run.action ? ` ${run.action}` : ''}`,
    );
  return [
    `Invariant broken at step ${m.step} of a sequence on ${m.name} (queue ${m.config.queue}):`,
    ...violations.map((v) => `  [invariant ${v.invariant}] ${v.message}`),
    'Steps:',
    ...m.log.map((line) => `  ${line}`),
    `Jobs: ${m.describeJobs() || 'none'}`,
    'Lock keys:',
    ...locks.map(
      (l, d) =>
        `  d${d} (${m.keys[d]}): fast ${l.fast ?? '-'}, queued [${l.queued.join(', ')}], expiring [${l.expiring.join(', ')}], running [${l.running.join(', ')}]`,
    ),
    'Runs:',
    ...runs.map((line) => `  ${line}`),
  ].join('\n');
}

const short = (id: string | undefined) => id ?? '(none)';

/** Which job ids exist now (a job accepted in this step that a worker already saw counts: removeOnComplete). */
async function present(m: Model, ids: readonly (string | undefined)[], acceptedNow: readonly string[]) {
  const queue = m.system.queues[m.config.queue];
  const found = new Set<string>();
  for (const id of new Set(ids)) {
    if (id === undefined) continue;
    if ((await queue.getJob(id)) !== undefined) found.add(id);
    else if (acceptedNow.includes(id) && m.system.seenByWorker.has(`${m.seq}:${id}`)) found.add(id);
  }
  return found;
}

/** Events of the step so far: jobs replaced by the `replace` strategy. */
function replacedSince(m: Model, from: number): string[] {
  return m.system.events.slice(from).flatMap((event) => (event.type === 'replaced' ? [event.replacedJobId] : []));
}

/**
 * The holders replaced by the entries of a bulk up to entry `upTo` (the entries settle in order, each strategy after
 * the one before it): a duplicate answered before a later entry replaced its holder named a holder then.
 */
function replacedByEntries(m: Model, from: number, ids: readonly (string | undefined)[], upTo: number): Set<string> {
  const by = new Set(ids.slice(0, upTo + 1));
  return new Set(
    m.system.events
      .slice(from)
      .flatMap((event) => (event.type === 'replaced' && by.has(event.jobId) ? [event.replacedJobId] : [])),
  );
}

/**
 * A replaced job must never have started, or only been put back by the `reschedule` strategy before its handler
 * (docs/conflict-strategies.md, `replace`).
 */
function judgeReplaced(m: Model, ids: readonly string[]): Violation[] {
  return ids.flatMap((id) => {
    const job = m.job(id);
    // A holder already gone (removed by hand, its slot kept: the documented gap) was not removed by the replace.
    if (!job || job.gone || job.state === 'unknown') return [];
    if ((job.started === 0 || job.neverRan) && ['waiting', 'delayed', 'prioritized'].includes(job.state)) return [];
    return [
      {
        invariant: '4',
        message: `replace removed job ${id} (${job.state}, started ${job.started} times), which had started`,
      },
    ];
  });
}

/** Jobs whose id a caller may pass as `jobId` (BullMQ refuses integer ids, its own counter's). */
const reusable = (m: Readonly<Model>) => m.current().filter((job) => !/^\d+$/.test(job.id));

interface AddParams {
  digest: number;
  via: 'add' | 'enqueue';
  delay: boolean;
  attempts: 1 | 2 | 3;
  jobId: 'library' | 'fresh' | 'reuse';
  pick: number;
  removeOnComplete: boolean;
  priority: boolean;
}

function jobOptions(p: { delay: boolean; attempts: number; removeOnComplete?: boolean; priority?: boolean }) {
  const opts: JobsOptions = { attempts: p.attempts };
  if (p.attempts > 1) opts.backoff = { type: 'fixed', delay: LONG };
  if (p.delay) opts.delay = LONG;
  if (p.removeOnComplete) opts.removeOnComplete = true;
  if (p.priority) opts.priority = 1;
  return opts;
}

/**
 * What `queue.add` (or a bulk entry) returned: the job it created (data with our tag), the job named by the caller's
 * `jobId` (BullMQ's own id deduplication, documented as `enqueued`), or a duplicate (the holder, fetched or a handle).
 */
async function classify(
  m: Model,
  id: string | undefined,
  tag: string,
  reusedLive: string | undefined,
  acceptedBefore: readonly string[] = [],
): Promise<Answer> {
  if (id === undefined) {
    m.found.push({ invariant: '4', message: 'queue.add/addBulk answered with a job that has no id' });
    return { status: 'duplicate', existingJobId: undefined };
  }
  const job = (await m.system.queues[m.config.queue].getJob(id)) as Job<ModelJobData> | undefined;
  if (job?.data.tag === tag) return { status: 'enqueued', jobId: id };
  if (reusedLive === id) return { status: 'enqueued', jobId: id, reused: true };
  const known = acceptedBefore.includes(id) || m.jobs.some((j) => j.id === id);
  // An id never seen before is the job created for this entry (a later entry may have replaced it already).
  if (!known) return { status: 'enqueued', jobId: id };
  return { status: 'duplicate', existingJobId: id };
}

function describeAnswer(answer: Answer): string {
  return answer.status === 'enqueued'
    ? `enqueued ${answer.jobId}${answer.reused ? ' (its existing job)' : ''}`
    : `duplicate of ${short(answer.existingJobId)}`;
}

class AddCommand implements ModelCommand {
  constructor(readonly p: AddParams) {}

  check(m: Readonly<Model>): boolean {
    const p = this.p;
    const features = [
      `jobId:${p.jobId}`,
      `via:${p.via}`,
      p.delay ? 'delay' : '',
      p.removeOnComplete ? 'removeOnComplete' : '',
      p.priority ? 'priority' : '',
    ];
    if (features.some((feature) => DISABLED.has(feature))) return false;
    return p.jobId !== 'reuse' || reusable(m).length > 0;
  }

  async run(m: Model, s: System): Promise<void> {
    const p = this.p;
    const queue = s.queues[m.config.queue];
    const candidates = reusable(m);
    const reused = p.jobId === 'reuse' ? candidates[p.pick % candidates.length] : undefined;
    const jobId = reused?.id ?? (p.jobId === 'fresh' ? `c${m.seq}x${m.step + 1}` : undefined);
    const data: ModelJobData = { key: m.keys[p.digest], seq: m.seq, tag: m.newTag() };
    const opts: JobsOptions = { ...jobOptions(p), ...(jobId ? { jobId } : {}) };
    const holders = stepHolders(m);
    const from = s.events.length;
    const label = `${this.toString()}${reused ? ` [jobId ${reused.id}, a ${reused.gone ? 'gone' : reused.state} job of d${reused.digest}]` : ''}`;
    let replaced: string[] = [];
    await step(m, label, async () => {
      const reusedLive = reused && !reused.gone ? reused.id : undefined;
      let answer: Answer;
      if (p.via === 'enqueue') {
        const result = await s.service.enqueue(queue, m.name, data, opts);
        answer =
          result.status === 'enqueued'
            ? { status: 'enqueued', jobId: result.job.id!, reused: result.job.id === reusedLive }
            : { status: 'duplicate', existingJobId: result.existingJobId };
      } else {
        try {
          answer = await classify(m, (await queue.add(m.name, data, opts)).id, data.tag, reusedLive);
        } catch (error) {
          if (!(error instanceof DuplicateJobError) || m.config.client !== 'raise') throw error;
          answer = { status: 'duplicate', existingJobId: error.existingJobId };
        }
      }
      replaced = replacedSince(m, from);
      replaced.forEach((id) => holders.replaced.add(id));
      if (answer.status === 'enqueued') answer.delayed = p.delay;
      else if (reused && answer.existingJobId === reused.id) answer.ownId = true;
      const named = answer.status === 'enqueued' ? answer.jobId : answer.existingJobId;
      const accepted = answer.status === 'enqueued' ? [answer.jobId] : [];
      const exists = await present(m, [named], accepted);
      m.found.push(...judgeAnswer(m, p.digest, answer, holders, (id) => exists.has(id)));
      m.found.push(...judgeReplaced(m, replaced));
      if (answer.status === 'enqueued' && !answer.reused) m.add(answer.jobId, p.digest);
      return describeAnswer(answer) + (replaced.length ? `, replacing ${replaced.join(', ')}` : '');
    });
  }

  toString(): string {
    const p = this.p;
    const options = [
      p.via === 'add' ? 'queue.add' : 'service.enqueue',
      p.delay && 'delay 1 h',
      p.attempts > 1 && `attempts ${p.attempts}`,
      p.jobId === 'fresh' && 'own jobId',
      p.jobId === 'reuse' && `jobId of job #${p.pick}`,
      p.removeOnComplete && 'removeOnComplete',
      p.priority && 'priority 1',
    ].filter(Boolean);
    return `add(d${p.digest}; ${options.join(', ')})`;
  }
}

interface BulkEntry {
  digest: number;
  delay: boolean;
  attempts: 1 | 2 | 3;
}

class AddBulkCommand implements ModelCommand {
  constructor(readonly entries: readonly BulkEntry[]) {}

  check(): boolean {
    return !DISABLED.has('bulk') && !(DISABLED.has('delay') && this.entries.some((e) => e.delay));
  }

  async run(m: Model, s: System): Promise<void> {
    const queue = s.queues[m.config.queue];
    const bulk = this.entries.map((e) => ({
      name: m.name,
      data: { key: m.keys[e.digest], seq: m.seq, tag: m.newTag() } satisfies ModelJobData,
      opts: jobOptions(e),
    }));
    const holders = stepHolders(m);
    const from = s.events.length;
    await step(m, String(this), async () => {
      let ids: (string | undefined)[];
      let raised: DuplicateJobError | undefined;
      try {
        ids = (await queue.addBulk(bulk)).map((job) => job.id);
      } catch (error) {
        if (!(error instanceof DuplicateJobError) || m.config.client !== 'raise') throw error;
        raised = error;
        // `raise` throws after enqueueing the others: find what was created by the tags.
        const all = (await queue.getJobs([
          'waiting',
          'prioritized',
          'active',
          'delayed',
          'completed',
          'failed',
        ])) as Job<ModelJobData>[];
        const byTag = new Map(all.filter(Boolean).map((job) => [job.data.tag, job.id]));
        ids = bulk.map((entry) => byTag.get(entry.data.tag));
      }
      const replaced = replacedSince(m, from);
      replaced.forEach((id) => holders.replaced.add(id));
      const answers: Answer[] = [];
      let firstDuplicate = true;
      for (let i = 0; i < bulk.length; i++) {
        const id = ids[i];
        if (raised) {
          if (id !== undefined) answers.push({ status: 'enqueued', jobId: id });
          else {
            answers.push({ status: 'duplicate', existingJobId: firstDuplicate ? raised.existingJobId : undefined });
            firstDuplicate = false;
          }
        } else {
          const acceptedBefore = answers.flatMap((a) => (a.status === 'enqueued' ? [a.jobId] : []));
          answers.push(await classify(m, id, bulk[i].data.tag, undefined, acceptedBefore));
        }
      }
      const accepted = answers.flatMap((a) => (a.status === 'enqueued' ? [a.jobId] : []));
      const exists = await present(
        m,
        answers.map((a) => (a.status === 'enqueued' ? a.jobId : a.existingJobId)),
        accepted,
      );
      const outcomes: string[] = [];
      answers.forEach((answer, i) => {
        const digest = this.entries[i].digest;
        if (answer.status === 'enqueued') answer.delayed = this.entries[i].delay;
        const unnamed = raised && answer.status === 'duplicate' && answer.existingJobId === undefined;
        const replacedYet = replacedByEntries(m, from, ids, i);
        const verdicts = judgeAnswer(m, digest, answer, holders, (id) => exists.has(id), replacedYet);
        // `raise` names only the first duplicate of a bulk.
        m.found.push(...(unnamed ? verdicts.filter((v) => !v.message.includes('without naming')) : verdicts));
        if (answer.status === 'enqueued') m.add(answer.jobId, digest);
        outcomes.push(`d${digest}: ${describeAnswer(answer)}`);
      });
      m.found.push(...judgeReplaced(m, replaced));
      return outcomes.join('; ') + (raised ? ' (threw DuplicateJobError)' : '');
    });
  }

  toString(): string {
    const entries = this.entries.map(
      (e) => `d${e.digest}${e.delay ? ' delay 1 h' : ''}${e.attempts > 1 ? ` attempts ${e.attempts}` : ''}`,
    );
    return `queue.addBulk([${entries.join(', ')}])`;
  }
}

/** Ends the current attempt of a job held at its gate. */
class FinishCommand implements ModelCommand {
  constructor(
    readonly pick: number,
    readonly action: Action,
  ) {}

  check(m: Readonly<Model>): boolean {
    return !DISABLED.has(`action:${this.action}`) && m.blockedRuns().length > 0;
  }

  async run(m: Model): Promise<void> {
    const runs = m.blockedRuns();
    const run = runs[this.pick % runs.length];
    await step(m, `${this.toString()} [job ${run.jobId}, attempt ${run.attemptsStarted}]`, async () => {
      const job = m.job(run.jobId);
      if (job) {
        const wasParked = job.movedByHandler === true || job.parkedForRetry === true || job.stepped === true;
        job.movedByHandler = this.action === 'delay' || this.action === 'nameDelayed';
        if (job.movedByHandler) job.stepped = true;
        // A later step (it re-entered the run-time lock a step parked, or the job stepped before: counted in its hash,
        // kept across a `job.retry()` from failed) that fails and is retried, or is rate limited, keeps it parked until
        // it is due again (JobRun.parkForRetry); one failed for good gives it back (allowed here, checked no further).
        // Found by seed 46 at MODEL_SCALE=3 (session 46): a step, a failure for good, `job.retry()`, then a retried
        // failure: the library parked (the job had stepped), the model had forgotten the step.
        job.parkedForRetry =
          !job.movedByHandler && wasParked && (this.action === 'fail' || this.action === 'rateLimit');
        // Parked again (a step): a reaper run before this one no longer covers its end.
        if (job.movedByHandler || job.parkedForRetry) job.reapedAfterEnd = false;
      }
      run.release(this.action);
      return 'released';
    });
  }

  toString(): string {
    return `handler of running job #${this.pick}: ${this.action}`;
  }
}

/** A worker dies mid-job: the job is recovered by the stalled-job check (same id); the killed handler never returns. */
class StallCommand implements ModelCommand {
  constructor(readonly pick: number) {}

  check(m: Readonly<Model>): boolean {
    return !DISABLED.has('stall') && m.blockedRuns().length > 0;
  }

  async run(m: Model, s: System): Promise<void> {
    const runs = m.blockedRuns();
    const run = runs[this.pick % runs.length];
    await step(m, `${this.toString()} [job ${run.jobId}]`, async () => {
      await s.kill(run);
      return 'killed';
    });
  }

  toString(): string {
    return `kill the worker of running job #${this.pick}`;
  }
}

/** An operation on one job picked among those in some states. */
abstract class JobCommand implements ModelCommand {
  abstract readonly states: Parameters<Model['jobsIn']>;
  abstract readonly feature: string;
  constructor(readonly pick: number) {}

  check(m: Readonly<Model>): boolean {
    return !DISABLED.has(this.feature) && m.jobsIn(...this.states).length > 0;
  }

  protected picked(m: Model) {
    const jobs = m.jobsIn(...this.states);
    return jobs[this.pick % jobs.length];
  }

  protected async bullJob(m: Model, id: string): Promise<Job> {
    const job = await m.system.queues[m.config.queue].getJob(id);
    if (!job) throw new Error(`job ${id} not found`);
    return job;
  }

  abstract run(m: Model, s: System): Promise<void>;
  abstract toString(): string;
}

class PromoteCommand extends JobCommand {
  readonly feature = 'promote';
  readonly states = ['delayed'] as Parameters<Model['jobsIn']>;
  async run(m: Model): Promise<void> {
    const job = this.picked(m);
    await step(m, `${this.toString()} [${job.id}]`, async () => {
      await (await this.bullJob(m, job.id)).promote();
      return 'promoted';
    });
  }
  toString(): string {
    return `promote delayed job #${this.pick}`;
  }
}

class ChangeDelayCommand extends JobCommand {
  readonly feature = 'changeDelay';
  readonly states = ['delayed'] as Parameters<Model['jobsIn']>;
  async run(m: Model): Promise<void> {
    const job = this.picked(m);
    await step(m, `${this.toString()} [${job.id}]`, async () => {
      await (await this.bullJob(m, job.id)).changeDelay(2 * LONG);
      return 'delay changed';
    });
  }
  toString(): string {
    return `changeDelay(2 h) of delayed job #${this.pick}`;
  }
}

class RemoveCommand extends JobCommand {
  readonly feature = 'remove';
  readonly states = ['waiting', 'prioritized', 'delayed', 'completed', 'failed'] as Parameters<Model['jobsIn']>;
  async run(m: Model): Promise<void> {
    const job = this.picked(m);
    await step(
      m,
      `${this.toString()} [${job.id}, ${job.state}]`,
      async () => {
        await (await this.bullJob(m, job.id)).remove();
        return 'removed';
      },
      { removing: true, releasing: true },
    );
  }
  toString(): string {
    return `job.remove() of job #${this.pick}`;
  }
}

/**
 * `job.retry()` of a failed or completed job. Lead: a job whose lock type takes its enqueue lock again on retry must get
 * it, or `retry()` throws DuplicateJobError and the job stays where it was.
 */
class RetryCommand extends JobCommand {
  readonly feature = 'retry';
  readonly states = ['failed', 'completed'] as Parameters<Model['jobsIn']>;
  async run(m: Model): Promise<void> {
    const job = this.picked(m);
    const state = job.state as 'failed' | 'completed';
    const others = m.holders(job.digest).filter((holder) => holder.id !== job.id);
    const refused = m.promise.retryRetakesLock && others.length >= m.limit;
    // A slot a removed job still keeps (documented gap) may or may not count: then either answer is accepted.
    const undecided = !refused && m.promise.retryRetakesLock && others.length + m.gap(job.digest).length >= m.limit;
    const expected = refused
      ? `DuplicateJobError (held by ${others.map((o) => o.id).join(', ')}), the job stays ${state}`
      : 'the job runs again';
    await step(
      m,
      `${this.toString()} [${job.id}, ${state}]`,
      async () => {
        let error: unknown;
        try {
          await (await this.bullJob(m, job.id)).retry(state);
        } catch (e) {
          error = e;
        }
        const judged = !undecided || !(error === undefined || error instanceof DuplicateJobError);
        if (judged && (refused !== error instanceof DuplicateJobError || (!refused && error !== undefined))) {
          m.found.push({
            invariant: 'retry',
            message: `job.retry() of ${state} job ${job.id} (d${job.digest}) should give ${expected}; it ${error === undefined ? 'succeeded' : `threw ${describeError(error)}`}`,
          });
        }
        return error === undefined ? 'retried' : `threw ${describeError(error)}`;
      },
      {
        after: () =>
          refused && job.state !== state
            ? [
                {
                  invariant: 'retry',
                  message: `job ${job.id} was refused a retry but is now ${job.state}, not ${state}`,
                },
              ]
            : [],
      },
    );
  }
  toString(): string {
    return `job.retry() of finished job #${this.pick}`;
  }
}

class DrainCommand implements ModelCommand {
  constructor(readonly delayed: boolean) {}
  check(): boolean {
    return !DISABLED.has('drain');
  }
  async run(m: Model, s: System): Promise<void> {
    await step(
      m,
      String(this),
      async () => {
        await s.queues[m.config.queue].drain(this.delayed);
        return 'drained';
      },
      { removing: true },
    );
  }
  toString(): string {
    return `queue.drain(${this.delayed})`;
  }
}

type CleanState = 'completed' | 'failed' | 'delayed' | 'wait' | 'prioritized';

class CleanCommand implements ModelCommand {
  constructor(
    readonly state: CleanState,
    readonly limit: number,
  ) {}
  check(): boolean {
    return !DISABLED.has('clean');
  }
  async run(m: Model, s: System): Promise<void> {
    await step(
      m,
      String(this),
      async () => `cleaned [${(await s.queues[m.config.queue].clean(0, this.limit, this.state)).join(', ')}]`,
      { removing: true },
    );
  }
  toString(): string {
    return `queue.clean(0, ${this.limit}, '${this.state}')`;
  }
}

/** Removes every job, running ones too; their handlers then finish (BullMQ can no longer record them). */
class ObliterateCommand implements ModelCommand {
  check(): boolean {
    return !DISABLED.has('obliterate');
  }
  async run(m: Model, s: System): Promise<void> {
    await step(
      m,
      String(this),
      async () => {
        const running = m.blockedRuns();
        await s.queues[m.config.queue].obliterate({ force: true });
        for (const run of running) run.release('succeed');
        return running.length
          ? `obliterated; handlers of ${running.map((r) => r.jobId).join(', ')} finish`
          : 'obliterated';
      },
      { removing: true },
    );
  }
  toString(): string {
    return 'queue.obliterate({ force: true })';
  }
}

/** One full pass of the orphan reaper; afterwards no removed job keeps a general-path slot. */
class ReapCommand implements ModelCommand {
  check(): boolean {
    return !DISABLED.has('reap');
  }
  async run(m: Model, s: System): Promise<void> {
    await reapStep(m, s, String(this));
  }
  toString(): string {
    return 'reaper run';
  }
}

/** Whether BullMQ finished the job (completed, or failed for good). */
function finished(job: { state?: string }): boolean {
  return job.state === 'completed' || job.state === 'failed';
}

export async function reapStep(m: Model, s: System, label: string): Promise<void> {
  await step(m, label, async () => {
    const report = await s.reap();
    for (const job of m.jobs) {
      if (job.gone) job.reapedSinceGone = true;
      // A slot parked by a job that ended stays when a live job now has its id (ids restart after obliterate, a custom
      // id is given again), whatever that job's digest: a run-time lock's owner is the job id, and the reaper decides by
      // that job's status alone (the documented limit of a job id as a lock's owner, docs/reliability.md).
      const heir = m.jobs.some((other) => other !== job && other.id === job.id && !other.gone && !finished(other));
      if ((job.gone || finished(job)) && !heir) job.reapedAfterEnd = true;
    }
    const items = report.items.map((item) => `${item.kind} ${item.jobId ?? '?'} (${item.reason})`);
    return items.length ? `reaped ${items.join(', ')}` : 'nothing reaped';
  });
}

/**
 * Lets a sequence finish: every held handler succeeds and every delayed job is promoted, until no job is left
 * unfinished; then the reaper runs once and the lock keys must hold exactly what the lock types promise (nothing, but
 * an until_expired period and the lease of a killed run).
 */
export async function quiesce(m: Model, s: System): Promise<void> {
  for (let round = 0; round < 25; round++) {
    const running = m.blockedRuns();
    const delayed = m.jobsIn('delayed');
    if (running.length === 0 && delayed.length === 0) break;
    await step(m, `quiesce: ${running.length} handlers succeed, ${delayed.length} delayed jobs promoted`, async () => {
      for (const run of running) run.release('succeed');
      for (const job of delayed) {
        const bull = await s.queues[m.config.queue].getJob(job.id);
        await bull?.promote().catch(() => undefined); // it may have been moved by a released handler meanwhile
      }
      return 'done';
    });
  }
  const unfinished = m.current().filter((job) => !['completed', 'failed', 'unknown'].includes(job.state));
  if (unfinished.length > 0) {
    m.found.push({
      invariant: 'quiescence',
      message: `jobs still unfinished after every handler succeeded and every delayed job was promoted: ${unfinished
        .map((job) => `${job.id} ${job.state}`)
        .join(', ')}`,
    });
  }
  await reapStep(m, s, 'reaper run (quiescence)');
}

const digestArb = fc.nat({ max: DIGESTS - 1 });
const attemptsArb = fc.constantFrom<1 | 2 | 3>(1, 2, 3);
const weighted = <T>(weight: number, arbitrary: fc.Arbitrary<T>) => ({ weight, arbitrary });

const addArb = fc
  .record({
    digest: digestArb,
    via: fc.constantFrom<'add' | 'enqueue'>('add', 'enqueue'),
    delay: fc.oneof(weighted(3, fc.constant(false)), weighted(2, fc.constant(true))),
    attempts: attemptsArb,
    jobId: fc.oneof(
      weighted(8, fc.constant<'library'>('library')),
      weighted(1, fc.constant<'fresh'>('fresh')),
      weighted(2, fc.constant<'reuse'>('reuse')),
    ),
    pick: fc.nat({ max: 9 }),
    removeOnComplete: fc.oneof(weighted(9, fc.constant(false)), weighted(1, fc.constant(true))),
    priority: fc.oneof(weighted(9, fc.constant(false)), weighted(1, fc.constant(true))),
  })
  .map((p) => new AddCommand(p));

const bulkArb = fc
  .array(fc.record({ digest: digestArb, delay: fc.boolean(), attempts: attemptsArb }), { minLength: 2, maxLength: 4 })
  .map((entries) => new AddBulkCommand(entries));

const actionArb = fc.oneof(
  weighted(4, fc.constant<Action>('succeed')),
  weighted(4, fc.constant<Action>('fail')),
  ...ACTIONS.filter((a) => a !== 'succeed' && a !== 'fail').map((a) => weighted(1, fc.constant(a))),
);

/** Every command, weighted: enqueues and handler outcomes most, operator actions and crashes less, obliterate rarely. */
export const COMMANDS: fc.Arbitrary<ModelCommand>[] = [
  fc.oneof(
    weighted(12, addArb),
    weighted(4, bulkArb),
    weighted(
      14,
      fc.tuple(fc.nat({ max: 9 }), actionArb).map(([pick, action]) => new FinishCommand(pick, action)),
    ),
    weighted(
      6,
      fc.nat({ max: 9 }).map((pick) => new PromoteCommand(pick)),
    ),
    weighted(
      2,
      fc.nat({ max: 9 }).map((pick) => new ChangeDelayCommand(pick)),
    ),
    weighted(
      2,
      fc.nat({ max: 9 }).map((pick) => new RemoveCommand(pick)),
    ),
    weighted(
      4,
      fc.nat({ max: 9 }).map((pick) => new RetryCommand(pick)),
    ),
    weighted(
      1,
      fc.boolean().map((delayed) => new DrainCommand(delayed)),
    ),
    weighted(
      2,
      fc
        .tuple(fc.constantFrom<CleanState>('completed', 'failed', 'delayed', 'wait', 'prioritized'), fc.nat({ max: 2 }))
        .map(([state, limit]) => new CleanCommand(state, limit)),
    ),
    weighted(
      1,
      fc.constant(null).map(() => new ObliterateCommand()),
    ),
    weighted(
      2,
      fc.nat({ max: 9 }).map((pick) => new StallCommand(pick)),
    ),
    weighted(
      2,
      fc.constant(null).map(() => new ReapCommand()),
    ),
  ),
];

export type { StepHolders };
