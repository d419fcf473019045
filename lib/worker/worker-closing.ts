import { DelayedError, type Job, type Worker } from 'bullmq';

const signals = new WeakMap<Worker, AbortSignal>();

/**
 * A signal aborted once `worker` starts closing (`worker.close()`, forced or not, as the application shuts down): a job
 * of it waiting for its run-time lock stops waiting, and is put back, instead of holding the close up to `lockTimeout`.
 * `undefined` without a worker.
 */
export function closingSignal(worker: Worker | undefined): AbortSignal | undefined {
  if (!worker) return undefined;
  const known = signals.get(worker);
  if (known) return known;
  const controller = new AbortController();
  signals.set(worker, controller.signal);
  const abort = () => controller.abort(new Error(`Worker of queue "${worker.name}" is closing`));
  if (worker.closing !== undefined) abort();
  else worker.once('closing', abort);
  return controller.signal;
}

/** The signals given (the job's own, its worker's closing one). */
export function signalsOf(...signals: (AbortSignal | undefined)[]): AbortSignal[] {
  return signals.filter((signal): signal is AbortSignal => signal !== undefined);
}

/** The error a wait for the run-time lock ends with when its signal is aborted (see `RuntimeLease.take`). */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

/**
 * The worker started closing while the job waited for its run-time lock: nothing ran, so the job goes back to delayed
 * (due at once, its attempts untouched, as `reschedule` moves it) with the enqueue lock it holds, for a worker that
 * stays; `moved` runs once it moved. Without a token, or when the move fails (a forced close's connection is gone: the
 * job comes back as stalled), `error` is thrown as it is.
 */
export async function putBack(
  job: Job<unknown, unknown>,
  token: string | undefined,
  error: unknown,
  moved: () => Promise<void> | undefined,
): Promise<never> {
  if (token === undefined) throw error;
  try {
    await job.moveToDelayed(Date.now(), token);
  } catch {
    throw error;
  }
  await moved();
  throw new DelayedError('Put back, its attempts untouched: its worker closed while it waited for its run-time lock');
}
