import type { Job, JobsOptions, Queue } from 'bullmq';
import type { AddFn } from '../locks/enqueue-lock.js';
import { bullKeys } from '../redis/keys.js';

/** A job bulk entry as `Queue#addBulk` takes it. */
export interface BulkJob {
  /** The job's name: with the queue, it picks the unique-job definition that applies. */
  name: string;
  /** The job's data (what its lock arguments and digest are computed from). */
  data: unknown;
  /** BullMQ's job options (`jobId`, `delay`, …); BullMQ's `deduplication` is refused on a unique job. */
  opts?: JobsOptions;
}

/** A queue's own `addBulk`. */
export type AddBulkFn = (jobs: BulkJob[]) => Promise<Job<unknown, unknown>[]>;

/** A queue's own methods, which the guard replaces. */
export interface QueueOriginals {
  add: AddFn;
  addBulk: AddBulkFn;
}

/** Fewest queues remembered before closed ones are swept. */
const SWEEP_FROM = 64;

/** The queues guarded for enqueue, with their own `add`/`addBulk` (so the library reaches BullMQ through them). */
export class GuardedQueues {
  /**
   * By qualified name (`<prefix>:<name>`: one queue name may live under two BullMQ prefixes), every queue object of
   * that name guarded and not swept, the latest last: a queue registered with BullModule and a `new Queue(sameName)`
   * guarded by hand and closed after use are two, and closing the second must not forget the first.
   */
  private readonly byQualifiedName = new Map<string, Queue[]>();
  private readonly originalMethods = new WeakMap<Queue, QueueOriginals>();
  /** How many queues are remembered. */
  private remembered = 0;
  /** How many queues were left after the last sweep of closed ones: the next comes once there are twice as many. */
  private swept = 0;

  /**
   * Remembers a queue and its own methods. Queues closed since are forgotten (swept once the queues remembered have
   * doubled since the last sweep): an application that guards short-lived queues of many names (a queue per tenant,
   * closed after use) must not keep every one it ever guarded (~7.5 KB each on a shared connection).
   */
  register(queue: Queue, originals: QueueOriginals): void {
    const same = this.byQualifiedName.get(queue.qualifiedName) ?? [];
    const at = same.indexOf(queue);
    if (at >= 0) same.splice(at, 1);
    else this.remembered++;
    same.push(queue);
    this.byQualifiedName.set(queue.qualifiedName, same);
    this.originalMethods.set(queue, originals);
    if (this.remembered >= Math.max(SWEEP_FROM, 2 * this.swept)) this.sweep();
  }

  /**
   * The guarded queue of this name under this BullMQ prefix, or with no prefix given the latest guarded queue of the
   * name (to retry dead-set entries): the latest one still open, if any.
   */
  get(name: string, prefix?: string): Queue | undefined {
    if (prefix !== undefined) return latestOpen(this.byQualifiedName.get(bullKeys.qualifiedName(prefix, name)));
    return latestNamed(this.latest(), name);
  }

  /** A queue's own methods (the queue's methods themselves for a queue that is not guarded). */
  originals(queue: Queue): QueueOriginals {
    return (
      this.originalMethods.get(queue) ?? {
        add: (name, data, opts) => queue.add(name, data, opts),
        addBulk: (jobs) => queue.addBulk(jobs),
      }
    );
  }

  /** Forgets the queues closed (`queue.close()`: BullMQ's `closing` is set from then on; a closed queue adds nothing). */
  private sweep(): void {
    this.remembered = 0;
    for (const [name, queues] of this.byQualifiedName) {
      const open = queues.filter((queue) => queue.closing === undefined);
      if (open.length === 0) this.byQualifiedName.delete(name);
      else this.byQualifiedName.set(name, open);
      this.remembered += open.length;
    }
    this.swept = this.remembered;
  }

  /** Per qualified name, its latest open queue (its latest, when all are closed). */
  private latest(): Queue[] {
    return [...this.byQualifiedName.values()].map((queues) => latestOpen(queues)!);
  }

  /** The guarded queues: name and key prefix (the reaper checks jobs there). */
  list(): { name: string; prefix: string }[] {
    return this.latest().map((queue) => ({
      name: queue.name,
      prefix: bullKeys.prefixOf(queue),
    }));
  }
}

/** The latest of `queues` not closed, else the latest. */
function latestOpen(queues: readonly Queue[] | undefined): Queue | undefined {
  return queues?.findLast((queue) => queue.closing === undefined) ?? queues?.at(-1);
}

/** The last of `queues` with this name: of one name under several BullMQ prefixes, the latest guarded or started. */
export function latestNamed<T extends { name: string }>(queues: readonly T[], name: string): T | undefined {
  return queues.findLast((queue) => queue.name === name);
}
