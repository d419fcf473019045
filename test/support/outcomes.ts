import type { Job, Worker } from 'bullmq';
import { deferred, type Deferred } from './deferred.js';

/**
 * What a worker reported for each job, in process: the value the processor returned (before BullMQ serializes it, so
 * `undefined` and `null` stay apart) and the error object of every failed attempt (its class, not only its message).
 * Create it before adding the jobs it should see.
 */
export class Outcomes {
  private readonly results = new Map<string, Deferred<unknown>>();
  private readonly errors_ = new Map<string, Error[]>();
  private readonly failureWaiters: { jobId: string; count: number; done: Deferred<Error[]> }[] = [];

  constructor(worker: Worker) {
    worker.on('completed', (job: Job, result: unknown) => this.resultOf(job.id!).resolve(result));
    worker.on('failed', (job: Job | undefined, error: Error) => {
      if (!job?.id) return;
      const list = this.errors_.get(job.id) ?? [];
      list.push(error);
      this.errors_.set(job.id, list);
      for (const waiter of [...this.failureWaiters]) {
        if (waiter.jobId === job.id && list.length >= waiter.count) {
          this.failureWaiters.splice(this.failureWaiters.indexOf(waiter), 1);
          waiter.done.resolve([...list]);
        }
      }
    });
  }

  /** Resolves with what the processor returned for the job (the worker's `completed` event). */
  completed(jobId: string): Promise<unknown> {
    return this.resultOf(jobId).promise;
  }

  /** Resolves with the errors of the job's failed attempts once there are at least `count` of them. */
  failures(jobId: string, count = 1): Promise<Error[]> {
    const list = this.errors_.get(jobId) ?? [];
    if (list.length >= count) return Promise.resolve([...list]);
    const done = deferred<Error[]>();
    this.failureWaiters.push({ jobId, count, done });
    return done.promise;
  }

  /** The errors of the job's failed attempts so far. */
  errors(jobId: string): Error[] {
    return [...(this.errors_.get(jobId) ?? [])];
  }

  private resultOf(jobId: string): Deferred<unknown> {
    let entry = this.results.get(jobId);
    if (!entry) this.results.set(jobId, (entry = deferred<unknown>()));
    return entry;
  }
}
