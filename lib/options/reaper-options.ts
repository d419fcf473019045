import { describeOptionValue, integerProblem, isPlainObject, MAX_TIMER_MS } from '../common/option-values.js';

/** A BullMQ queue the reaper checks jobs in: its name and key prefix (`'bull'` unless you set one). */
export interface ReaperQueue {
  /** The queue's name. */
  name: string;
  /** The queue's BullMQ key prefix (its `prefix` option; `'bull'` by default). */
  prefix: string;
}

/** Options of the orphan reaper (`UniqueJobsModule.forRoot({ reaper })`). */
export interface ReaperOptions {
  /** Milliseconds between runs in each process (only the leader works). `false`: never on a timer. Default 60,000. */
  interval?: number | false;
  /** SCAN `COUNT` per call: keys Redis looks at in one step. Default 500. */
  batchSize?: number;
  /** A run stops scanning after this many ms and goes on where it stopped at the next run. Default 1,000. */
  timeBudget?: number;
  /**
   * A general-path enqueue lock, an idempotency claim or a deduplication key whose job finished, found orphaned, is
   * checked again after this many ms before it is released, so a lock taken just before its job was added (or, for a
   * deduplication key, before `job.retry()` moved its job back) is never mistaken for an orphan. Default 15,000.
   *
   * Accepted from 0, but a grace below 1,000 is warned about once at bootstrap: a suspect is then confirmed almost at
   * once (0: on the next tick), so a run that meets an enqueue between its lock and its add (one round trip apart on
   * the general path, longer if the producer's event loop stalls) releases the lock of a job about to be added, which
   * then waits without it beside any duplicate enqueued next. Meant for tests that run the reaper by hand while
   * nothing is being enqueued.
   */
  grace?: number;
  /**
   * Extra queues whose jobs may own locks under this prefix (besides the queues this application registers and those
   * found by their `meta` key).
   */
  queues?: readonly ReaperQueue[];
}

/**
 * The least `reaper.grace` (ms) taken without a warning: far above the round trip between a general-path lock and its
 * add (and the CLI's least `--grace`, 1 s).
 */
export const LEAST_SAFE_GRACE = 1_000;

/** Checks `reaper` (module options). */
export function validateReaperOptions(reaper: unknown, fail: (option: string, problem: string) => never): void {
  if (reaper === undefined) return;
  const valid = ['interval', 'batchSize', 'timeBudget', 'grace', 'queues'];
  if (!isPlainObject(reaper))
    fail('reaper', `must be an object with ${valid.join(', ')} (got ${describeOptionValue(reaper)})`);
  for (const [option, value] of Object.entries(reaper)) {
    if (!valid.includes(option)) fail(`reaper.${option}`, `is not an option; valid: ${valid.join(', ')}`);
    if (value === undefined || (option === 'interval' && value === false)) continue;
    if (option === 'queues') {
      const queues = Array.isArray(value) ? (value as unknown[]) : undefined;
      const ok = queues?.every(
        (queue) =>
          isPlainObject(queue) &&
          typeof (queue as { name?: unknown }).name === 'string' &&
          typeof (queue as { prefix?: unknown }).prefix === 'string',
      );
      if (!ok) fail('reaper.queues', `must be a list of { name, prefix } (got ${describeOptionValue(value)})`);
      continue;
    }
    const min = option === 'grace' ? 0 : 1;
    // Milliseconds (interval, timeBudget, grace) become timers: bounded by what Node's timers accept.
    const problem =
      option === 'batchSize' ? integerProblem(value, min) : integerProblem(value, min, MAX_TIMER_MS, ' (milliseconds)');
    if (problem) fail(`reaper.${option}`, `${problem}${option === 'interval' ? ', or false' : ''}`);
  }
}
