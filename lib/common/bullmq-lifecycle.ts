import { RATE_LIMIT_ERROR, type Job } from 'bullmq';

/**
 * What BullMQ does with a job whose handler just threw:
 * - `'runs-again'`: the attempt does not count. The handler moved the job itself before throwing (`moveToDelayed` +
 *   `DelayedError`, `moveToWait`, `moveToWaitingChildren`: the job is no longer active), or asked for a rate limit
 *   (BullMQ's `RATE_LIMIT_ERROR`).
 * - `'retries'` or `'fails'`: BullMQ's own rule decides, read from BullMQ (`Job#shouldRetryJob`: attempts,
 *   the worker's `maxStartedAttempts`, a backoff strategy answering -1, errors it recognises by name such as
 *   `UnrecoverableError`). A BullMQ without that method answers `'retries'` (the caller then keeps nothing final).
 *
 * Asked before BullMQ moves the job, for decisions that cannot wait for the worker's `failed` event. Costs one Redis
 * call (the job's state), and a custom backoff strategy is called once more than BullMQ calls it.
 */
export async function attemptOutcome(
  job: Job<unknown, unknown>,
  error: unknown,
): Promise<'runs-again' | 'retries' | 'fails'> {
  return (await attemptEnd(job, error)).outcome;
}

/**
 * {@link attemptOutcome}, with when the job runs again: `delay`, the retry's backoff as BullMQ computed it (ms; 0 for a
 * retry at once, a move the handler made, a rate limit, or a BullMQ that cannot say). A built-in backoff with `jitter`
 * is drawn again when BullMQ moves the job: `delay` is then the longest it may draw ({@link jitterCeiling}).
 */
export async function attemptEnd(
  job: Job<unknown, unknown>,
  error: unknown,
): Promise<{ outcome: 'runs-again' | 'retries' | 'fails'; delay: number }> {
  if (error instanceof Error && error.message === RATE_LIMIT_ERROR) return { outcome: 'runs-again', delay: 0 };
  if ((await job.getState()) !== 'active') return { outcome: 'runs-again', delay: 0 };
  const shouldRetryJob = (job as unknown as { shouldRetryJob?: (err: unknown) => Promise<[boolean, number]> })
    .shouldRetryJob;
  if (typeof shouldRetryJob !== 'function') return { outcome: 'retries', delay: 0 };
  const [retry, delay] = await shouldRetryJob.call(job, error);
  return { outcome: retry ? 'retries' : 'fails', delay: wholeDelay(Math.max(delay, retry ? jitterCeiling(job) : 0)) };
}

/**
 * The longest backoff BullMQ's built-in strategies (`fixed`, `exponential`) may draw for the job's next retry when they
 * have a `jitter` (they draw at random below it, again at each call); 0 otherwise. A custom strategy is not bounded.
 */
function jitterCeiling(job: Job<unknown, unknown>): number {
  const backoff = job.opts?.backoff;
  if (typeof backoff !== 'object' || backoff === null || !(Number(backoff.jitter) > 0)) return 0;
  const delay = Number(backoff.delay ?? 0);
  if (backoff.type === 'fixed') return delay;
  // BullMQ's `exponential`: 2^(attempts made, counting this one, - 1) × delay.
  if (backoff.type === 'exponential') return Math.round(2 ** job.attemptsMade * delay);
  return 0;
}

/**
 * Whether a job's start may not be its first: a retry, a stalled job recovered, or a job brought back from `failed` or
 * `completed` (BullMQ counts every end in `attemptsMade`, unless a `retry` resets it along with `attemptsStarted`).
 */
export function isRestart(job: Job<unknown, unknown>): boolean {
  return job.attemptsMade > 0 || job.attemptsStarted > 1 || job.stalledCounter > 0;
}

/**
 * What a handler throws after moving its own job (BullMQ's step jobs): `moveToDelayed` + `DelayedError`,
 * `moveToWaitingChildren` + `WaitingChildrenError`, `moveToWait` + `WaitingError`. BullMQ then leaves the job where the
 * handler put it, counts no attempt, and delivers the same job again later (or, when the handler did not move it,
 * recovers it as stalled): the attempt ended between two steps, not in a failure.
 */
const STEP_MOVES: ReadonlySet<string> = new Set(['DelayedError', 'WaitingChildrenError', 'WaitingError']);

/** Whether `error` is one BullMQ takes for the handler having moved its job itself (by name, as BullMQ tests it). */
export function isStepMove(error: unknown): error is { name: string } {
  return typeof error === 'object' && error !== null && STEP_MOVES.has(String((error as { name?: unknown }).name));
}

/** A day: see {@link parkedLeaseMs}. */
const PARKED_GRACE_MS = 24 * 60 * 60 * 1000;

/**
 * The lease of what a step job holds between two steps (a run-time lock slot parked for its next delivery, an
 * idempotency claim handed over to it), past the job's next run time: a day, or `lease` (the holder's own: the lock's
 * `runtimeLockLease`, the key's `lease`) when longer. A paused queue, workers down for a deploy or a backlog may hold
 * the job back long past its due time; what it holds must not end before it comes back, or a duplicate delivered first
 * would start at step 1. Held for a job removed or finished without its next delivery, it does not wait that long
 * where the job can be checked: a take of the lock that meets the slot gives it back (a holder of the taker's queue),
 * and the orphan reaper's pass releases slots and Redis records.
 */
export function parkedLeaseMs(lease: number): number {
  return Math.max(lease, PARKED_GRACE_MS);
}

/**
 * How long what a step job holds stays held while the job waits for its next delivery, after the step `step` (an error
 * name {@link isStepMove} accepts): a delayed step until the job is due (`job.delay`, which BullMQ's `moveToDelayed`
 * set) plus `lease` ({@link parkedLeaseMs}: the time a paused or busy queue may take to deliver it); a job waiting for
 * its children `forChildren` (children take what they take), `lease` when longer; a job moved back to wait, `lease`.
 */
export function parkedMs(job: Job<unknown, unknown>, step: string, lease: number, forChildren: number): number {
  if (step === 'WaitingChildrenError') return Math.max(forChildren, lease);
  if (step === 'DelayedError') return wholeDelay(job.delay) + lease;
  return lease;
}

/** BullMQ's defaults of a worker's `lockDuration` and `stalledInterval` (ms), for a worker whose options cannot be read. */
const BULLMQ_LOCK_DURATION_MS = 30_000;
const BULLMQ_STALLED_INTERVAL_MS = 30_000;

/**
 * How long BullMQ may take to recover a job its handler left active (a step error thrown without moving the job), on
 * `worker`: the job's lock lasts a `lockDuration`, then the next stall check (every `stalledInterval`) moves it back.
 */
export function stallRecoveryMs(worker: unknown): number {
  const opts = (worker as { opts?: { lockDuration?: unknown; stalledInterval?: unknown } } | undefined)?.opts;
  const option = (value: unknown, fallback: number) => (typeof value === 'number' && value > 0 ? value : fallback);
  return (
    option(opts?.lockDuration, BULLMQ_LOCK_DURATION_MS) + option(opts?.stalledInterval, BULLMQ_STALLED_INTERVAL_MS)
  );
}

/**
 * {@link parkedMs}, asked of BullMQ for a job its handler may not have moved: one still `active` (the step error thrown
 * alone, or a job moved and already taken again) comes back once BullMQ recovers it as stalled, up to `recoveryMs`
 * ({@link stallRecoveryMs}) later, so what it holds is kept that long plus `lease`. A state BullMQ cannot answer
 * leaves the lease computed from the step. One Redis call (the job's state).
 */
export async function stepParkedMs(
  job: Job<unknown, unknown>,
  step: string,
  lease: number,
  forChildren: number,
  recoveryMs: number,
): Promise<number> {
  const parked = parkedMs(job, step, lease, forChildren);
  const active = await job.getState().then(
    (state) => state === 'active',
    () => false,
  );
  return active ? Math.max(parked, recoveryMs + lease) : parked;
}

/**
 * The longest delay a lock's lifetime counts (about 31,700 years: any job delayed longer waits as good as forever).
 * Redis takes an expiry in whole milliseconds below 2^63 ms from now, and a script writes a number past 10^17 in
 * exponent notation, which Redis refuses too.
 */
const LONGEST_DELAY_MS = 1e15;

/** A delay as a lock's lifetime counts it: whole milliseconds from 0 to {@link LONGEST_DELAY_MS} (NaN: 0). */
export function wholeDelay(ms: number): number {
  const delay = Number(ms);
  return Number.isFinite(delay) ? Math.min(Math.max(Math.ceil(delay), 0), LONGEST_DELAY_MS) : 0;
}
