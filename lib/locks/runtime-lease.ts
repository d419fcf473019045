import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { LeaseKeeper } from './lease-keeper.js';
import { CLOSED_MARK, PARKED_MARK, takeMark } from './lock-marks.js';
import type { AcquireResult, LockStore, ParkedSlot } from './lock-store.js';

/** The options of a run-time lock. */
export interface RuntimeLeaseSettings {
  /** How long a conflict waits for the holder (ms). */
  readonly lockTimeout: number;
  /** The lease (ms), renewed every third of it while held. */
  readonly runtimeLockLease: number;
  /** Holders admitted at once. */
  readonly lockLimit: number;
}

/**
 * One job's run-time lock: a slot of `<prefix>:{<digest>}:running` with a lease, renewed while the handler runs, so
 * a crashed holder blocks its digest at most one lease. The owner is the job (`runtimeLockOwner`): a retried or
 * recovered job re-enters its own slot at once. Each take is told apart by a mark its lease expiry carries
 * (`takeMark`): renewals keep it and the release names it, so a delivery that stalled past BullMQ's job lock (its job
 * recovered and running elsewhere, in the slot re-taken) neither renews nor gives back the slot the other delivery now
 * holds, and a renewal whose answer was lost changes nothing of it.
 */
export class RuntimeLease {
  private keeper: LeaseKeeper | undefined;
  /** When the lock was taken (ms), for the held time of the `unlocked` event. */
  takenAt = 0;
  /** Whether an acquire failed without an answer (it may have been applied). */
  private unanswered = false;
  /** Whether the take re-entered the slot the job's last step parked (this delivery resumes a step job). */
  resumed = false;
  /** This take's mark (see `takeMark`): what its renewals and release name; {@link CLOSED_MARK} once closed off. */
  private mark = takeMark();
  /** The re-mark of {@link closeOff}, while it is on its way. */
  private closing: Promise<boolean> | undefined;

  constructor(
    private readonly store: LockStore,
    private readonly key: string,
    private readonly owner: string,
    private readonly settings: RuntimeLeaseSettings,
    private readonly report: {
      lost(): void;
      error(error: unknown): void;
      /**
       * Gives back those of the slots parked for a step job's next delivery (read by a refused take) whose job will
       * not come back for them; resolves whether one was given back (the take is then asked again at once). Asked once
       * a take, on its first refusal that names parked slots.
       */
      freeStale?(parked: readonly ParkedSlot[]): Promise<boolean>;
    },
    /** The form of the same owner an earlier build wrote, whose slot a take takes over (see `LockStore.acquire`). */
    private readonly formerly?: string,
  ) {}

  /** Whether the lock is held (taken and not given back). */
  get held(): boolean {
    return this.keeper !== undefined;
  }

  /**
   * Waits up to `lockTimeout` for a slot, backing off (25 ms doubling to 1 s) rather than polling hot. `signals` (the
   * job's, aborted by BullMQ's `worker.cancelJob`; its worker's, aborted when it starts closing): the wait ends when
   * one is aborted, with an `AbortError` whose `cause` is its reason; a slot taken is kept (the handler sees the signal).
   */
  take(signals: readonly AbortSignal[] = []): Promise<AcquireResult> {
    return this.takeBy(performance.now() + this.settings.lockTimeout, signals);
  }

  /** {@link take}, waiting until `deadline` (`performance.now()`, ms) at most; one attempt at least. */
  private async takeBy(deadline: number, signals: readonly AbortSignal[]): Promise<AcquireResult> {
    const { runtimeLockLease, lockLimit } = this.settings;
    let wait = 25;
    let staleAsked = false;
    for (;;) {
      const sentAt = performance.now();
      let held: AcquireResult;
      try {
        held = await this.store.acquire(
          this.key,
          this.owner,
          runtimeLockLease,
          lockLimit,
          true,
          this.mark,
          this.formerly,
        );
      } catch (error) {
        // The acquire may have been applied although its answer failed (a command timeout, a connection lost after it
        // was sent): the slot may stay held by this job. Not given back here: the owner is the job, shared by its other
        // deliveries (a stalled copy recovered elsewhere may hold this very slot, re-entered). See releaseUnanswered.
        this.unanswered = true;
        throw error;
      }
      const left = deadline - performance.now();
      if (held.acquired) {
        this.takenAt = Date.now();
        if (held.resumed) this.resumed = true;
        this.keeper = new LeaseKeeper(() => this.renewOnce(runtimeLockLease), runtimeLockLease, this.report, sentAt);
        return held;
      }
      if (held.parked && !staleAsked && this.report.freeStale) {
        staleAsked = true;
        if (await this.report.freeStale(held.parked)) continue;
      }
      if (left <= 0) return held;
      await pause(Math.min(wait, left), signals);
      wait = Math.min(wait * 2, 1000);
    }
  }

  /**
   * Takes the lock as {@link take} does; when its answer was read only after the lease it took could have ended (an
   * event-loop stall between the send and the read, longer than the lease), another job may have taken the lock
   * meanwhile, so it is asked once more, at once. The acquire drops ended leases first: it then refuses while another
   * holds the slot, else takes it anew (re-entrant: this owner, with a fresh lease). The whole wait, both takes, is
   * bounded by `lockTimeout` from the first ask: the second take waits only what is left of it (none once it has
   * passed: one attempt then, that does not wait).
   */
  async takeFresh(signals: readonly AbortSignal[] = []): Promise<AcquireResult> {
    const deadline = performance.now() + this.settings.lockTimeout;
    const held = await this.takeBy(deadline, signals);
    const keeper = this.keeper;
    if (!held.acquired || !keeper?.expired) return held;
    keeper.stop();
    this.keeper = undefined;
    return this.takeBy(deadline, signals);
  }

  /** Whether {@link closeOff} was asked. */
  get closedOff(): boolean {
    return this.closing !== undefined;
  }

  /** One renewal under the slot's mark; asked again under the new one when a {@link closeOff} changed it meanwhile. */
  private async renewOnce(leaseMs: number): Promise<boolean> {
    const mark = this.mark;
    const renewed = await this.store.renewMarked(this.key, this.owner, leaseMs, mark);
    return renewed || (this.mark !== mark && this.store.renewMarked(this.key, this.owner, leaseMs, this.mark));
  }

  /**
   * Marks the held slot {@link CLOSED_MARK}: its worker closed with force while the handler runs on (BullMQ no longer
   * renews the job's lock, and another worker may recover the job), so a take of the same owner waits for this
   * handler's end instead of re-entering. Renewals and the release go on under the new mark. Resolves
   * whether the slot was still held.
   */
  closeOff(): Promise<boolean> {
    if (!this.keeper || this.closing) return this.closing ?? Promise.resolve(false);
    const { runtimeLockLease } = this.settings;
    const from = this.mark;
    this.closing = this.store.renewMarked(this.key, this.owner, runtimeLockLease, from, CLOSED_MARK).then((held) => {
      if (held) this.mark = CLOSED_MARK;
      return held;
    });
    return this.closing;
  }

  /**
   * Gives back a slot an acquire without an answer may have taken, once BullMQ failed the job for good (no delivery of
   * it runs any more): a later job of the digest would meet it until its lease ended. Resolves whether one was held.
   */
  releaseUnanswered(): Promise<boolean> {
    if (!this.unanswered) return Promise.resolve(false);
    this.unanswered = false;
    return this.store.release(this.key, this.owner);
  }

  /**
   * Stops renewing and keeps the slot for the job's next delivery, `leaseMs` from now (a step of a step job: the job is
   * parked, and its next delivery, the same owner, re-enters the slot at once). Resolves whether it was still held.
   */
  park(leaseMs: number): Promise<boolean> {
    const keeper = this.keeper;
    this.keeper = undefined;
    if (!keeper) return Promise.resolve(false);
    keeper.stop();
    if (keeper.expired) keeper.reportLost();
    // Marked parked: no handler renews it, and the orphan reaper releases it once the job is gone or finished.
    return this.afterCloseOff(() => this.store.renewMarked(this.key, this.owner, leaseMs, this.mark, PARKED_MARK));
  }

  /**
   * Stops renewing and gives the slot back; resolves whether it was still held. A lease that ended under the handler
   * (an event-loop stall, or Redis out of reach, longer than the lease) is reported lost even when no renewal said so.
   * `inOrderOn`: send the release on that connection (see `LockStore.release`).
   */
  release(inOrderOn?: Redis): Promise<boolean> {
    const keeper = this.keeper;
    this.keeper = undefined;
    if (!keeper) return Promise.resolve(false);
    keeper.stop();
    if (keeper.expired) keeper.reportLost();
    // Closed off: on the library's connection (the caller sends no `inOrderOn`: the worker's is closing).
    return this.afterCloseOff(() => this.store.releaseMarked(this.key, this.owner, this.mark, inOrderOn));
  }

  /** `step` at once, or, when {@link closeOff} was asked, once its re-mark has landed (under the mark it left). */
  private afterCloseOff<T>(step: () => Promise<T>): Promise<T> {
    return this.closing ? this.closing.catch(() => false).then(step) : step();
  }
}

/**
 * Sleeps `ms`, or rejects with {@link cancelled} as soon as one of `signals` is aborted. Its listeners are removed when
 * it ends: a worker's signal lives as long as the worker, and must not keep one per wait.
 */
function pause(ms: number, signals: readonly AbortSignal[]): Promise<void> {
  const aborted = signals.find((signal) => signal.aborted);
  if (aborted) return Promise.reject(cancelled(aborted));
  return new Promise((resolve, reject) => {
    const end = (signal?: AbortSignal) => {
      clearTimeout(timer);
      for (const each of signals) each.removeEventListener('abort', onAbort);
      if (signal) reject(cancelled(signal));
      else resolve();
    };
    const onAbort = (event: Event) => end(event.target as AbortSignal);
    const timer = setTimeout(end, ms);
    for (const signal of signals) signal.addEventListener('abort', onAbort);
  });
}

/** The error a wait for the lock ends with when the job is cancelled: a handler honouring its signal throws alike. */
function cancelled(signal: AbortSignal): Error {
  const error = new Error('The job was cancelled while it waited for its run-time lock', { cause: signal.reason });
  error.name = 'AbortError';
  return error;
}
