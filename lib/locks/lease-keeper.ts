/**
 * Renews a lease (a run-time lock, an idempotency claim) every third of its length while a handler runs (a BullMQ job has no deadline, so a lease is
 * what keeps a crashed holder from blocking forever). Reports a lost lease once: the lease ended before a renewal (an
 * event-loop stall longer than the lease, or Redis unreachable for that long).
 */
export class LeaseKeeper {
  private readonly timer: NodeJS.Timeout;
  private lost = false;
  private stopped = false;

  constructor(
    /** Renews the lease once; `false` when the holder no longer holds it. */
    private readonly renewOnce: () => Promise<boolean>,
    leaseMs: number,
    private readonly report: { lost(): void; error(error: unknown): void },
  ) {
    this.timer = setInterval(() => void this.renew(), Math.max(1, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    if (this.lost || this.stopped) return;
    try {
      if (!(await this.renewOnce()) && !this.stopped) {
        this.lost = true;
        this.report.lost();
      }
    } catch (error) {
      // Store unreachable: try again at the next tick; the lease itself decides whether it is lost.
      this.report.error(error);
    }
  }

  /** Stops renewing. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }
}
