/** An entry's place in the order it was set: a place whose id now holds another place was left. */
interface Place<V> {
  readonly id: string;
  readonly entry: V;
}

/**
 * Entries by id, kept in the order they were set, whose aged ones are dropped oldest first: a `Map`'s behaviour (a new
 * value, or a value set again after its id was deleted, goes last). A `Map` alone would do, but dropping from its front
 * and walking it again from there walks past what V8 keeps of the entries deleted before (until it rebuilds the map): a
 * pass per operation cost a few µs with thousands of entries. Here a pass starts where the last one stopped.
 */
export class RecentEntries<V extends { readonly at: number }> {
  private readonly byId = new Map<string, Place<V>>();
  /** Places as set, oldest first, from `head` on. */
  private order: Place<V>[] = [];
  private head = 0;

  /** `cap`: the most entries its owner keeps at once; places left beyond twice that are given back. */
  constructor(private readonly cap: number) {}

  get size(): number {
    return this.byId.size;
  }

  get(id: string): V | undefined {
    return this.byId.get(id)?.entry;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Sets `entry` for `id`: it keeps its place when `id` holds it already, else it goes last, as the youngest. */
  set(id: string, entry: V): void {
    if (this.byId.get(id)?.entry === entry) return;
    const place = { id, entry };
    this.byId.set(id, place);
    this.order.push(place);
    // Places left (deleted or set anew) stay until a pass reaches them (behind a young entry: up to its age).
    if (this.order.length - this.head > 2 * this.cap + 64) {
      this.order = this.order.slice(this.head).filter((kept) => this.byId.get(kept.id) === kept);
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
      const place = this.order[this.head];
      if (this.byId.get(place.id) !== place) continue; // left: its id was deleted, or set anew in a later place
      if (now - place.entry.at < maxAgeMs) break; // oldest first: the rest are younger
      this.byId.delete(place.id);
      dropped.push(place.entry);
    }
    // The passed places are given back once they are most of the array (each place is moved O(1) times on average).
    if (this.head > 64 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    return dropped;
  }
}
