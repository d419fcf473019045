/**
 * Bounded waits for one event per connection (its next `ready`, its first connection), sharing one reaction on that
 * event's promise: a wait that gives up is forgotten at once. A reaction cannot be taken off a promise, so one per
 * wait on an event that does not come (an outage that lasts) would keep every given-up wait — its callback, its timer
 * and the promise it rejected — until the event came: ~1.35 KB per failed enqueue, without bound while the outage lasts.
 */
export class ReadyWaits<State> {
  private readonly waiting = new WeakMap<object, Set<(state: State) => void>>();

  /**
   * Calls `settled` once `event()` (asked once per `key` while waits for it are pending) resolves, unless the function
   * returned was called first (the wait gave up).
   */
  wait(key: object, event: () => Promise<State>, settled: (state: State) => void): () => void {
    let waits = this.waiting.get(key);
    if (!waits) {
      const pending = new Set<(state: State) => void>();
      waits = pending;
      this.waiting.set(key, pending);
      void event().then((state) => {
        if (this.waiting.get(key) === pending) this.waiting.delete(key);
        for (const callback of pending) callback(state);
      });
    }
    const own = waits;
    own.add(settled);
    return () => void own.delete(settled);
  }
}
