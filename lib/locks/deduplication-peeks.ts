import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import type { RedisScripts } from '../redis/redis-scripts.js';

interface Waiter {
  resolve(holder: string | undefined): void;
  reject(error: unknown): void;
}

type Reads = [key: string, waiters: Waiter[]][];

/** Keys of one script call at most: bounds the time Redis spends in one call, whatever the burst. */
const MAX_KEYS_PER_CALL = 500;

/**
 * Node's own `process.nextTick`, taken when this module loads: a test that fakes timers afterwards (Jest's
 * `useFakeTimers()` fakes `nextTick` too) must not leave a duplicate enqueue waiting for the fake clock.
 */
const nextTick = process.nextTick.bind(process);

/**
 * Reads of BullMQ deduplication keys (who holds them), gathered per tick: every read asked before the process's next
 * tick, of one queue, goes to Redis as one script call, and a key asked several times is read once. A burst of
 * duplicate enqueues (a webhook storm for one event, a producer retrying) then costs one command and one socket write
 * per tick instead of one per enqueue; the write system call, not the script, was most of a duplicate's cost in this
 * process at 32 in flight (docs/performance.md, session 18).
 *
 * Each answer reflects Redis after the read was asked: the call leaves only once the tick in which it was asked ends,
 * and no answer is shared with a read asked after its call was sent. A call that fails as a whole while carrying
 * several keys (a key of the wrong type, a slot being moved between Cluster masters) is sent again one key per call,
 * so each read gets its own answer or error.
 */
export class DeduplicationPeeks {
  /** By the queue's job key prefix, then by key: the reads not sent yet. */
  private pending = new Map<string, Map<string, Waiter[]>>();

  constructor(private readonly scripts: RedisScripts) {}

  /** The job holding `key` (a deduplication key of the queue whose job keys start with `jobKeyPrefix`), if any. */
  peek(key: string, jobKeyPrefix: string): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) nextTick(() => this.flush());
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
      const entries: Reads = [...reads];
      for (let start = 0; start < entries.length; start += MAX_KEYS_PER_CALL) {
        void this.send(jobKeyPrefix, entries.slice(start, start + MAX_KEYS_PER_CALL));
      }
    }
  }

  /** Answers the reads of one call; never rejects (each waiter gets the answer or the error). */
  private async send(jobKeyPrefix: string, entries: Reads): Promise<void> {
    let holders: (string | null)[];
    try {
      holders = await this.read(entries, jobKeyPrefix);
    } catch (error) {
      if (entries.length > 1) {
        await Promise.all(entries.map((entry) => this.send(jobKeyPrefix, [entry])));
        return;
      }
      for (const waiter of entries[0][1]) waiter.reject(error);
      return;
    }
    entries.forEach(([, waiters], i) => {
      for (const waiter of waiters) waiter.resolve(holders[i] ?? undefined);
    });
  }

  private async read(entries: Reads, jobKeyPrefix: string): Promise<(string | null)[]> {
    const answer = await this.scripts.run(
      'peekDeduplication',
      entries.map(([key]) => key),
      [jobKeyPrefix],
    );
    if (!Array.isArray(answer) || answer.length !== entries.length) {
      throw new UniqueJobsError(`peekDeduplication answered ${JSON.stringify(answer)} for ${entries.length} keys`);
    }
    return answer as (string | null)[];
  }
}
