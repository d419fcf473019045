/**
 * Deduplication keys this process recently found held: the digests that see duplicates. A duplicate enqueue of one of
 * them is answered by a small read (`peekDeduplication`) instead of BullMQ's whole add script; a new digest still
 * costs exactly one call, and a contended one that was released costs one read more, once. Bounded: the least recently
 * contended keys are forgotten first.
 */
export class ContendedDigests {
  private readonly keys = new Map<string, true>();

  constructor(private readonly max = 10_000) {}

  has(key: string): boolean {
    if (!this.keys.has(key)) return false;
    this.keys.delete(key); // most recently used last
    this.keys.set(key, true);
    return true;
  }

  add(key: string): void {
    this.keys.delete(key);
    this.keys.set(key, true);
    if (this.keys.size > this.max) this.keys.delete(this.keys.keys().next().value!);
  }

  delete(key: string): void {
    this.keys.delete(key);
  }
}
