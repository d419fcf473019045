import type { Job, JobsOptions, Queue } from 'bullmq';
import type { AddFn } from '../locks/enqueue-lock.js';

/** A job bulk entry as `Queue#addBulk` takes it. */
export interface BulkJob {
  name: string;
  data: unknown;
  opts?: JobsOptions;
}

/** A queue's own `addBulk`. */
export type AddBulkFn = (jobs: BulkJob[]) => Promise<Job[]>;

/** A queue's own methods, which the guard replaces. */
export interface QueueOriginals {
  add: AddFn;
  addBulk: AddBulkFn;
}

/** The queues guarded for enqueue, with their own `add`/`addBulk` (so the library reaches BullMQ through them). */
export class GuardedQueues {
  private readonly byName = new Map<string, Queue>();
  private readonly originalMethods = new WeakMap<Queue, QueueOriginals>();

  /** Remembers a queue and its own methods. */
  register(queue: Queue, originals: QueueOriginals): void {
    this.byName.set(queue.name, queue);
    this.originalMethods.set(queue, originals);
  }

  /** A guarded queue by name (to retry dead-set entries). */
  get(name: string): Queue | undefined {
    return this.byName.get(name);
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

  /** The guarded queues: name and key prefix (the reaper checks jobs there). */
  list(): { name: string; prefix: string }[] {
    return [...this.byName.values()].map((queue) => ({ name: queue.name, prefix: queue.opts.prefix ?? 'bull' }));
  }
}
