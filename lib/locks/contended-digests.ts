/**
 * Deduplication keys this process recently found held: the digests that see duplicates. A duplicate enqueue of one of
 * them is answered by a small read (`peekDeduplication`) instead of BullMQ's whole add script; a new digest still
 * costs exactly one call, and a contended one that was released costs one read more, once. Bounded: the keys found
 * contended longest ago are forgotten first.
 */
export class ContendedDigests {
  private readonly keys = new Map<string, true>();

  constructor(private readonly max = 10_000) {}

  has(key: string): boolean {
    // Not moved to the end on a hit (a delete and a set of the key on every duplicate): a key forgotten while still
    // contended costs one whole add script, whose answer makes it contended again. See docs/performance.md, session 17.
    return this.keys.has(key);
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
