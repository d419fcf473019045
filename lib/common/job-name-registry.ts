import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';

/** What a registry entry must say about itself. */
export interface JobNameScoped {
  /** Job names it applies to; `undefined`: every name of the queue without options of its own. */
  readonly jobNames: readonly string[] | undefined;
  /** Where it was declared (for messages). */
  readonly source: string;
}

/**
 * Options per (queue, job name): an entry for named jobs, or one for every other name of the queue. Two declarations
 * for one name fail at bootstrap, unless they are the same declared object (registered twice: forRoot and decorator).
 */
export class JobNameRegistry<T extends JobNameScoped> {
  private readonly byQueue = new Map<string, { named: Map<string, Entry<T>>; any?: Entry<T> }>();

  constructor(
    /** What the entries are, for messages: e.g. `'unique job options'`. */
    private readonly label: string,
  ) {}

  /** Adds `resolved` (declared as `declared`) for its job names; answers the entry in force. */
  add(queue: string, declared: object, resolved: T): T {
    const slot = this.byQueue.get(queue) ?? { named: new Map<string, Entry<T>>() };
    this.byQueue.set(queue, slot);
    const claim = (current: Entry<T> | undefined, which: string): Entry<T> => {
      if (current && current.declared !== declared) {
        throw new InvalidUniqueJobOptionsError(
          resolved.source,
          'jobName',
          `${which} of queue "${queue}" already has ${this.label} (from ${current.resolved.source}); give each job name one set of options`,
        );
      }
      return current ?? { declared, resolved };
    };
    if (resolved.jobNames === undefined) {
      slot.any = claim(slot.any, 'every job name');
      return slot.any.resolved;
    }
    for (const name of resolved.jobNames) slot.named.set(name, claim(slot.named.get(name), `job "${name}"`));
    return slot.named.get(resolved.jobNames[0])!.resolved;
  }

  /** The entry for a job, if any. */
  find(queue: string, name: string): T | undefined {
    const slot = this.byQueue.get(queue);
    return (slot?.named.get(name) ?? slot?.any)?.resolved;
  }

  /** Whether any entry was added at all. */
  get size(): number {
    return this.byQueue.size;
  }

  /** Every entry added for the queue. */
  entries(queue: string): T[] {
    const slot = this.byQueue.get(queue);
    if (!slot) return [];
    return [...new Set([...slot.named.values(), ...(slot.any ? [slot.any] : [])].map((entry) => entry.resolved))];
  }

  /** Whether any entry was added for the queue. */
  hasQueue(queue: string): boolean {
    return this.byQueue.has(queue);
  }
}

interface Entry<T> {
  declared: object;
  resolved: T;
}
