/** One operation waiting in a {@link SerialQueue}. */
interface Task {
  operation: () => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  pauseAfter: (value: unknown) => boolean;
}

/**
 * Runs operations one at a time, in order, for a store whose database is one connection (SQLite): a transaction opened
 * on it must not take in another operation's statements. Two lanes: transactions of transactional mode go before the
 * operations that were queued earlier (a duplicate's claim queued behind a holder's transaction then finds the record
 * completed and replays it, instead of finding it in progress and waiting for its lease), and after an operation that
 * asks for it (a successful claim), the queue waits one turn of the event loop, so that the claimant can queue its
 * transaction first (it does so without any I/O in between).
 */
export class SerialQueue {
  private readonly urgent: Task[] = [];
  private readonly normal: Task[] = [];
  private running = false;

  /**
   * Queues `operation`; resolves or rejects as it does. A failure does not stop the queue.
   *
   * @param urgent Runs before every non-urgent operation still waiting.
   * @param pauseAfter Given the operation's value: whether to wait one turn of the event loop before the next one.
   */
  run<T>(operation: () => Promise<T>, urgent = false, pauseAfter?: (value: T) => boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const task: Task = {
        operation,
        resolve: resolve as (value: unknown) => void,
        reject,
        pauseAfter: (pauseAfter as ((value: unknown) => boolean) | undefined) ?? (() => false),
      };
      (urgent ? this.urgent : this.normal).push(task);
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      for (let task = this.next(); task; task = this.next()) {
        let pause = false;
        try {
          const value = await task.operation();
          pause = task.pauseAfter(value);
          task.resolve(value);
        } catch (error) {
          task.reject(error);
        }
        if (pause) await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      this.running = false;
    }
  }

  private next(): Task | undefined {
    return this.urgent.shift() ?? this.normal.shift();
  }
}
