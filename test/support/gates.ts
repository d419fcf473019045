import type { Job } from 'bullmq';
import { deferred, type Deferred } from './deferred.js';

/** Every deferred handed out by `hold()` (including those of `Gates`) that `releaseHeld()` has not let go yet. */
const held = new Set<Deferred>();

/**
 * A deferred a handler waits on (or signals through). `releaseHeld()`, which `useApps` runs after each test, resolves
 * every one still pending, so a failed assertion never leaves a worker waiting for an active job at close.
 */
export function hold(): Deferred {
  const d = deferred();
  held.add(d);
  return d;
}

/** Resolves every deferred handed out by `hold()` so far. */
export function releaseHeld(): void {
  for (const d of held) d.resolve();
  held.clear();
}

/**
 * A handler whose runs can be held: a run of a job whose `data.tag` is held waits until `release(tag)`. Every run
 * resolves `started(tag)` and returns `ran:<tag>`.
 */
export class Gates {
  private readonly started_ = new Map<string, Deferred<Job>>();
  private readonly gates = new Map<string, Deferred>();

  readonly handler = async (job: Job): Promise<unknown> => {
    const tag = String((job.data as { tag?: unknown }).tag);
    this.startedOf(tag).resolve(job);
    await this.gates.get(tag)?.promise;
    return `ran:${tag}`;
  };

  /** Runs of jobs tagged `tag` wait until `release(tag)` (or the end of the test). */
  hold(...tags: string[]): this {
    for (const tag of tags) this.gates.set(tag, hold());
    return this;
  }

  release(tag: string): void {
    this.gates.get(tag)?.resolve();
  }

  releaseAll(): void {
    for (const gate of this.gates.values()) gate.resolve();
  }

  /** Resolves with the job when a run of a job tagged `tag` starts. */
  started(tag: string): Promise<Job> {
    return this.startedOf(tag).promise;
  }

  private startedOf(tag: string): Deferred<Job> {
    let entry = this.started_.get(tag);
    if (!entry) this.started_.set(tag, (entry = deferred<Job>()));
    return entry;
  }
}

/**
 * The common held handler: the run of the job whose `data.n` is 1 resolves `started` and waits for `gate`; every run
 * returns `data.n`.
 */
export function holdFirstRun(): { gate: Deferred; started: Deferred; handler: (job: Job) => Promise<unknown> } {
  const gate = hold();
  const started = hold();
  const handler = async (job: Job): Promise<unknown> => {
    const { n } = job.data as { n?: number };
    if (n === 1) {
      started.resolve();
      await gate.promise;
    }
    return n;
  };
  return { gate, started, handler };
}
