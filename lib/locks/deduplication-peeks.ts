import type { RedisScripts } from '../redis/redis-scripts.js';

interface Waiter {
  resolve(holder: string | undefined): void;
  reject(error: unknown): void;
}

/** Keys of one script call at most: bounds the time Redis spends in one call, whatever the burst. */
const MAX_KEYS_PER_CALL = 500;

/**
 * Reads of BullMQ deduplication keys (who holds them), gathered per tick: every read asked before the process's next
 * tick, of one queue, goes to Redis as one script call, and a key asked several times is read once. A burst of
 * duplicate enqueues (a webhook storm for one event, a producer retrying) then costs one command and one socket write
 * per tick instead of one per enqueue; the write system call, not the script, was most of a duplicate's cost in this
 * process at 32 in flight (docs/performance.md, session 18).
 *
 * Each answer reflects Redis after the read was asked: the call leaves only once the tick in which it was asked ends,
 * and no answer is shared with a read asked after its call was sent.
 */
export class DeduplicationPeeks {
  /** By the queue's job key prefix, then by key: the reads not sent yet. */
  private pending = new Map<string, Map<string, Waiter[]>>();

  constructor(private readonly scripts: RedisScripts) {}

  /** The job holding `key` (a deduplication key of the queue whose job keys start with `jobKeyPrefix`), if any. */
  peek(key: string, jobKeyPrefix: string): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) process.nextTick(() => this.flush());
      let reads = this.pending.get(jobKeyPrefix);
      if (!reads) this.pending.set(jobKeyPrefix, (reads = new Map<string, Waiter[]>()));
      const waiters = reads.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else reads.set(key, [{ resolve, reject }]);
    });
  }

  private flush(): void {
    const pending = this.pending;
    this.pending = new Map();
    for (const [jobKeyPrefix, reads] of pending) {
      const entries = [...reads];
      for (let start = 0; start < entries.length; start += MAX_KEYS_PER_CALL) {
        this.send(jobKeyPrefix, entries.slice(start, start + MAX_KEYS_PER_CALL));
      }
    }
  }

  private send(jobKeyPrefix: string, entries: [string, Waiter[]][]): void {
    const keys = entries.map(([key]) => key);
    this.scripts.run('peekDeduplication', keys, [jobKeyPrefix]).then(
      (answer) => {
        const holders = answer as (string | null)[];
        entries.forEach(([, waiters], i) => {
          for (const waiter of waiters) waiter.resolve(holders[i] ?? undefined);
        });
      },
      (error: unknown) => {
        for (const [, waiters] of entries) for (const waiter of waiters) waiter.reject(error);
      },
    );
  }
}
