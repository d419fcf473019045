/**
 * Entries by id, kept in the order they were set, whose aged ones are dropped oldest first. A `Map` alone would do,
 * but dropping from its front and walking it again from there walks past what V8 keeps of the entries deleted before
 * (until it rebuilds the map): a pass per operation cost a few µs with thousands of entries. Here a pass starts where
 * the last one stopped.
 */
export class RecentEntries<V extends { readonly at: number }> {
  private readonly byId = new Map<string, V>();
  /** Entries as set, oldest first, from `head` on; one whose id now holds another value (or none) is skipped. */
  private order: { id: string; entry: V }[] = [];
  private head = 0;

  /** `cap`: the most entries its owner keeps at once; places of deleted entries beyond twice that are given back. */
  constructor(private readonly cap: number) {}

  get size(): number {
    return this.byId.size;
  }

  get(id: string): V | undefined {
    return this.byId.get(id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Sets `entry` for `id`; a new value (not the one held) goes last, as the youngest. */
  set(id: string, entry: V): void {
    if (this.byId.get(id) === entry) return;
    this.byId.set(id, entry);
    this.order.push({ id, entry });
    // Deleted or replaced entries keep their places until a pass reaches them (behind a young entry: up to its age).
    if (this.order.length - this.head > 2 * this.cap + 64) {
      this.order = this.order.slice(this.head).filter(({ id: kept, entry: held }) => this.byId.get(kept) === held);
      this.head = 0;
    }
  }

  delete(id: string): boolean {
    return this.byId.delete(id);
  }

  clear(): void {
    this.byId.clear();
    this.order = [];
    this.head = 0;
  }

  /** Drops the entries set `maxAgeMs` or more before `now` (their `at`), oldest first; returns them. */
  dropOlder(now: number, maxAgeMs: number): V[] {
    const dropped: V[] = [];
    for (; this.head < this.order.length; this.head++) {
      const { id, entry } = this.order[this.head];
      if (this.byId.get(id) !== entry) continue; // deleted, or set again since (a later place holds it)
      if (now - entry.at < maxAgeMs) break; // oldest first: the rest are younger
      this.byId.delete(id);
      dropped.push(entry);
    }
    // The passed places are given back once they are most of the array (each entry is moved O(1) times on average).
    if (this.head > 64 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    return dropped;
  }
}
