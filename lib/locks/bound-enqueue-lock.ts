import type { Redis } from 'ioredis';
import type { EnqueueLock, LockedJob } from './enqueue-lock.js';
import type { JobEnqueueLock } from './lock.js';
import type { AcquireResult } from './lock-store.js';

/** The connection of the worker running the job, as far as a release at the job's end can use it. */
export interface ReleaseConnection {
  /** The worker's connection when it is known to reach the server the library's keys live on; else `undefined`. */
  inOrder(): Redis | undefined;
  /** The same, waiting for the answer while it is not in yet (a worker's first jobs). */
  onSameServer(): Promise<Redis | undefined>;
}

/** How a bound lock reports: each release (the `unlocked` event), and a release sent without waiting that failed. */
export interface BoundLockReport {
  released(): void;
  error(error: unknown): void;
}

/**
 * A job's enqueue lock bound to the job, remembering whether the job still holds it, so a lock released at start is
 * not released again at the end (no Redis call for it).
 */
export class BoundEnqueueLock implements JobEnqueueLock {
  private held = true;
  /** Released at the end by BullMQ itself, with the job: reported once BullMQ recorded the end ({@link ended}). */
  private withJob = false;

  constructor(
    private readonly lock: EnqueueLock,
    private readonly locked: LockedJob,
    private readonly report: BoundLockReport,
    /** The worker's connection, to send a release at the end on when it reaches the lock's server. */
    private readonly worker: ReleaseConnection | undefined = undefined,
    /**
     * Bound by the worker running the job, or for a job queued already: a re-take never takes the lock for a job that
     * has ended meanwhile, or that a worker (another one, for the former) runs.
     */
    private readonly running = false,
  ) {}

  async release(): Promise<void> {
    if (!this.held) return;
    this.held = false;
    if (await this.lock.release(this.locked)) this.report.released();
  }

  async releaseAtEnd(byAttempt = false): Promise<void> {
    if (!this.held) return;
    this.held = false;
    const inOrderOn = this.worker?.inOrder();
    const token = byAttempt && this.running ? this.locked.job.token : undefined;
    // A release checked against the job's BullMQ lock needs a connection reaching both the lock and BullMQ's keys: not
    // known yet (a worker's first jobs), it waits for the answer and is sent there, awaited.
    const on = inOrderOn ?? (token === undefined ? undefined : await this.worker?.onSameServer());
    const released = this.lock.releaseAtEnd(this.locked, on, token).then((done) => {
      if (done === 'with-job') this.withJob = true;
      else if (done) this.report.released();
    });
    if (!inOrderOn) return released;
    released.catch((error: unknown) => this.report.error(error));
  }

  /** BullMQ recorded the job's end: a lock it deleted with the job is now gone. */
  ended(): void {
    if (!this.withJob) return;
    this.withJob = false;
    this.report.released();
  }

  async retake(): Promise<AcquireResult> {
    const answer = await this.lock.retake(this.locked, this.running);
    this.held = answer.acquired;
    return answer;
  }

  /** Whether the hold ends at a time of its own, which a move of the job's run time moves ({@link EnqueueLock.endsAtTtl}). */
  endsAtTtl(): boolean {
    return this.lock.endsAtTtl(this.locked.job);
  }

  async retime(runInMs: number): Promise<void> {
    if (this.held) await this.lock.retime(this.locked, runInMs);
  }
}
