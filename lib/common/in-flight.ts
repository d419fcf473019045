/**
 * Work under way per key (a job's), so that another step on the same key can wait for it to end first. What is waited
 * for never rejects; a key is forgotten once its latest work ended.
 */
export class InFlight {
  private readonly pending = new Map<string, Promise<void>>();

  /** Tracks `work` under `key` until it ends, and until work tracked earlier under it ends too. */
  track(key: string, work: Promise<unknown>): void {
    const ended = Promise.allSettled([this.pending.get(key), work]).then(() => undefined);
    this.pending.set(key, ended);
    void ended.then(() => {
      if (this.pending.get(key) === ended) this.pending.delete(key);
    });
  }

  /** Ends when the work tracked under `key` now has ended (at once when there is none). */
  async settled(key: string): Promise<void> {
    await this.pending.get(key);
  }
}
