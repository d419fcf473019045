/**
 * Work under way per key (a job's), so that another step on the same key can wait for it to end first. What is waited
 * for never rejects; a key is forgotten once its latest work ended.
 */
export class InFlight {
  private readonly pending = new Map<string, Promise<void>>();

  /** Tracks `work` under `key` until it ends (after work tracked earlier under it, if any). */
  track(key: string, work: Promise<unknown>): void {
    const ended = work.then(
      () => undefined,
      () => undefined,
    );
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
