import { performance } from 'node:perf_hooks';

/**
 * Renews a lease (a run-time lock, an idempotency claim) every third of its length while a handler runs (a BullMQ job
 * has no deadline, so a lease is what keeps a crashed holder from blocking forever). Reports a lost lease once: the
 * lease ended before a renewal (an event-loop stall longer than the lease, or Redis unreachable for that long).
 */
export class LeaseKeeper {
  /**
   * How often a lease of `leaseMs` is renewed (a third of it). A lease taken by a command sent this long ago or more
   * is due a renewal already: a holder reading its answer so late confirms it by a renewal before it relies on it.
   */
  static renewalPeriod(leaseMs: number): number {
    return Math.max(1, Math.floor(leaseMs / 3));
  }

  private timer: NodeJS.Timeout;
  private lost = false;
  private stopped = false;
  /**
   * When the last renewal that succeeded was sent (or, until one has, when the command that took the lease was sent).
   * The time its answer was read would not do: a renewal sent just before an event-loop stall is applied at once, but
   * its answer is read only after the stall, and would make a lease that ended during the stall look renewed.
   */
  private heldAt: number;

  constructor(
    /** Renews the lease once; `false` when the holder no longer holds it. */
    private readonly renewOnce: () => Promise<boolean>,
    private readonly leaseMs: number,
    private readonly report: { lost(): void; error(error: unknown): void },
    /**
     * When the command that took the lease was sent (`performance.now()`, ms; default now): its answer too can be read
     * only after a stall (another job's CPU-bound handler in the same process).
     */
    takenAt = performance.now(),
  ) {
    this.heldAt = takenAt;
    // The first renewal is due a period after the take was sent, not after its answer was read (at once when that
    // answer came late); the next ones every period.
    const period = LeaseKeeper.renewalPeriod(leaseMs);
    this.timer = setTimeout(
      () => {
        this.timer = setInterval(() => void this.renew(), period);
        this.timer.unref();
        void this.renew();
      },
      // Within [0, period]: a `takenAt` on another clock (a `Date.now()` by mistake) cannot overflow the timer.
      Math.min(period, Math.max(0, takenAt + period - performance.now())),
    );
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    if (this.lost || this.stopped) return;
    const sentAt = performance.now();
    try {
      if (await this.renewOnce()) this.heldAt = Math.max(this.heldAt, sentAt);
      else if (!this.stopped) this.reportLost();
    } catch (error) {
      // Store unreachable: try again at the next tick; the lease itself decides whether it is lost.
      this.report.error(error);
    }
  }

  /**
   * Whether the lease has ended (by this process's monotonic clock: a step of the wall clock, NTP's, moves nothing): no
   * renewal sent within the last lease succeeded. A holder whose handler returns right after an event-loop stall sees
   * this before any renewal could tell it. It can answer early when renewals take longer than two thirds of a lease to
   * be answered (Redis away or overloaded): each one extended the lease on the server after it was sent. A short
   * `runtimeLockLease` on a slow link can then report a lease lost that the server still held.
   */
  get expired(): boolean {
    return performance.now() - this.heldAt > this.leaseMs;
  }

  /** Reports the lease lost, unless already reported (by a renewal, or by a holder that found it {@link expired}). */
  reportLost(): void {
    if (this.lost) return;
    this.lost = true;
    this.report.lost();
  }

  /** Stops renewing. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer); // the first renewal's timeout, or the interval (Node clears either way)
  }
}
