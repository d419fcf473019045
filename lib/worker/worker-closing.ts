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
  return controller.signal;
}

/** The callbacks {@link onForcedClose} keeps for each worker, with one `closed` listener a worker. */
const closedCallbacks = new WeakMap<Worker, Set<() => void>>();

/**
 * Calls `callback` if the worker of `closing` (its {@link closingSignal}) closes while the caller still runs, that is
 * until the function it returns is called: a forced `close(true)`, since a graceful close waits for the worker's jobs
 * before BullMQ emits `closed`. One listener a worker however many jobs run (one a job would pass Node's limit of 10).
 */
export function onForcedClose(closing: AbortSignal | undefined, callback: () => void): () => void {
  const worker = closing && workers.get(closing);
  if (!worker) return () => undefined;
  let callbacks = closedCallbacks.get(worker);
  if (!callbacks) {
    const all = new Set<() => void>();
    callbacks = all;
    closedCallbacks.set(worker, all);
    worker.once('closed', () => all.forEach((each) => each()));
  }
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
 * The worker started closing while the job waited for its run-time lock: nothing ran, so the job goes back to delayed
 * (due at once, its attempts untouched, as `reschedule` moves it) with the enqueue lock it holds, for a worker that
 * stays; `moved` runs once it moved. A forced close (`close(true)`) closes the worker's connection under the move: it is
 * made again through a connection of its own, with the worker's connection options (the job's lock still holds the
 * worker's token), else the job would come back only as stalled, and fail for good when it had stalled before (BullMQ's
 * `maxStalledCount`) although its handler never ran. Without a token, or when neither move lands, `error` is thrown as
 * it is (the job then comes back as stalled).
 */
export async function putBack(
  job: Job<unknown, unknown>,
  token: string | undefined,
  error: unknown,
  closing: AbortSignal | undefined,
  moved: () => Promise<void> | undefined,
): Promise<never> {
  if (token === undefined) throw error;
  try {
    await job.moveToDelayed(Date.now(), token);
  } catch {
    const worker = closing && workers.get(closing);
    if (!worker) throw error;
    try {
      await moveElsewhere(job, token, worker);
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
async function moveElsewhere(job: Job<unknown, unknown>, token: string, worker: Worker): Promise<void> {
  const { connection, prefix } = worker.opts;
  const queue = new Queue(job.queueName, {
    connection,
    skipMetasUpdate: true,
    ...(prefix === undefined ? {} : { prefix }),
  });
  try {
    const fresh = await Job.fromId(queue, job.id!);
    if (!fresh) throw new Error(`Job ${job.id} is gone`);
    await fresh.moveToDelayed(Date.now(), token);
  } finally {
    await queue.close();
  }
}
