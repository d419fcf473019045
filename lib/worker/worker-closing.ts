import { DelayedError, Job, Queue, type Worker } from 'bullmq';

const signals = new WeakMap<Worker, AbortSignal>();
/** The worker of each closing signal (what a put-back that failed on the worker's own connection tries again through). */
const workers = new WeakMap<AbortSignal, Worker>();

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
  workers.set(controller.signal, worker);
  const abort = () => controller.abort(new Error(`Worker of queue "${worker.name}" is closing`));
  if (worker.closing !== undefined) abort();
  else worker.once('closing', abort);
  worker.once('closed', () => {
    closedWorkers.add(worker);
    closedCallbacks.get(worker)?.forEach((each) => each());
  });
  return controller.signal;
}

/** The callbacks {@link onForcedClose} keeps for each worker (called by the one `closed` listener of its signal). */
const closedCallbacks = new WeakMap<Worker, Set<() => void>>();
/** Workers BullMQ has closed, since their {@link closingSignal} was made. */
const closedWorkers = new WeakSet<Worker>();

/**
 * Calls `callback` if the worker of `closing` (its {@link closingSignal}) closes while the caller still runs, that is
 * until the function it returns is called (at once when it has closed already): a forced `close(true)`, since a
 * graceful close waits for the worker's jobs before BullMQ emits `closed`.
 */
export function onForcedClose(closing: AbortSignal | undefined, callback: () => void): () => void {
  const worker = closing && workers.get(closing);
  if (!worker) return () => undefined;
  if (closedWorkers.has(worker)) {
    callback();
    return () => undefined;
  }
  let callbacks = closedCallbacks.get(worker);
  if (!callbacks) closedCallbacks.set(worker, (callbacks = new Set()));
  const own = callbacks;
  own.add(callback);
  return () => void own.delete(callback);
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
 * The job's own earlier run holds its run-time lock, closed off under it when its worker closed with force (BullMQ
 * recovered the job while that handler runs on; `AcquireResult.closedOff`): not a duplicate, so no strategy. The job
 * goes back to delayed as {@link putBack} moves it, its attempts untouched, due when that lease ends (`retryAfter`;
 * renewed while the handler runs, else it ends): it runs after the earlier run, never completed in its place.
 */
export function waitForOwnRun(
  job: Job<unknown, unknown>,
  token: string | undefined,
  held: { retryAfter: number },
  closing: AbortSignal | undefined,
  moved: () => Promise<void> | undefined,
): Promise<never> {
  const error = new Error(`Job ${job.id} waits for its own earlier run, whose worker closed under it`);
  return putBack(job, token, error, closing, moved, Math.max(held.retryAfter, 0) + 10);
}

/**
 * The worker started closing while the job waited for its run-time lock: nothing ran, so the job goes back to delayed
 * (due at once, its attempts untouched, as `reschedule` moves it) with the enqueue lock it holds, for a worker that
 * stays; `moved` runs once it moved. A forced close (`close(true)`) closes the worker's connection under the move: it is
 * made again through a connection of its own, with the worker's connection options (the job's lock still holds the
 * worker's token), else the job would come back only as stalled, and fail for good when it had stalled before (BullMQ's
 * `maxStalledCount`) although its handler never ran. Without a token, or when neither move lands, `error` is thrown as
 * it is (the job then comes back as stalled). `dueInMs`: due that much later instead (a job waiting for its own earlier
 * run's closed-off run-time lock, see `AcquireResult.closedOff`).
 */
export async function putBack(
  job: Job<unknown, unknown>,
  token: string | undefined,
  error: unknown,
  closing: AbortSignal | undefined,
  moved: () => Promise<void> | undefined,
  dueInMs = 0,
): Promise<never> {
  if (token === undefined) throw error;
  try {
    await job.moveToDelayed(Date.now() + dueInMs, token);
  } catch {
    const worker = closing && workers.get(closing);
    if (!worker) throw error;
    try {
      await moveElsewhere(job, token, worker, dueInMs);
    } catch {
      throw error;
    }
  }
  await moved();
  throw new DelayedError('Put back, its attempts untouched: its worker closed while it waited for its run-time lock');
}

/**
 * The put-back's move through a queue of its own on the worker's connection options (its own connection to close). The
 * queue leaves the queue's meta alone (`skipMetasUpdate`: a Queue writes its own, defaults included, over the
 * application's, such as its events stream's length).
 */
async function moveElsewhere(
  job: Job<unknown, unknown>,
  token: string,
  worker: Worker,
  dueInMs: number,
): Promise<void> {
  const { connection, prefix } = worker.opts;
  const queue = new Queue(job.queueName, {
    connection,
    skipMetasUpdate: true,
    ...(prefix === undefined ? {} : { prefix }),
  });
  try {
    const fresh = await Job.fromId(queue, job.id!);
    if (!fresh) throw new Error(`Job ${job.id} is gone`);
    await fresh.moveToDelayed(Date.now() + dueInMs, token);
  } finally {
    await queue.close();
  }
}
