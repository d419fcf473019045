import { Job, type JobsOptions, type Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { OperationTracer } from '../common/operation-tracer.js';
import type { ClientConflict, ClientResolution, ConflictTools } from '../conflicts/conflict-strategy.interface.js';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { ANNOUNCED_BULK_ENTRIES, type BulksInProgress } from '../locks/bulks-in-progress.js';
import type { Taken } from '../locks/enqueue-lock.js';
import { bullKeys } from '../redis/keys.js';
import type { RedisAvailability } from '../redis/redis-availability.js';
import { writingTogether } from '../redis/write-together.js';
import type { JobDefinition, JobDefinitions } from '../options/job-definitions.js';
import type { BulkJob, GuardedQueues } from './guarded-queues.js';
import { readyBulk, type BulkEntry, type BulkRequest } from './bulk-readying.js';
import { asBullMQReads, newJobId, runtimeOnlyOpts } from './job-ids.js';
import { reportLocked, takeEnqueueLock } from './take-enqueue-lock.js';

/** What the producer side works with, built by the module. */
export interface EnqueuerDeps {
  readonly definitions: JobDefinitions;
  readonly queues: GuardedQueues;
  /** What conflict strategies may do. */
  readonly tools: ConflictTools;
  readonly events: UniqueJobsEvents;
  readonly tracer: OperationTracer;
  /** `false`: jobs pass straight through. */
  readonly enabled: boolean;
  /** Bounds the wait for a queue connection that is not ready. */
  readonly availability: RedisAvailability;
  /** The client the library's scripts run on (a bulk's lock calls leave in one socket write on it). */
  readonly client: Redis | Cluster;
  /** Where a bulk that takes many locks before its add announces itself. */
  readonly bulks: BulksInProgress;
}

/**
 * The producer side: `queue.add` / `addBulk` and the explicit `enqueue`: definition → digest → enqueue lock (one call
 * on the deduplication path) → on a duplicate, the client strategy → the result.
 */
export class Enqueuer {
  constructor(private readonly deps: EnqueuerDeps) {}

  /**
   * Enqueues a job under its uniqueness rules. Resolves what happened; `error` is what plain `queue.add` throws (the
   * `raise` strategy). Nothing is enqueued when the lock arguments cannot be hashed. No options (`undefined`, or `null`
   * as plain BullMQ takes it from JavaScript callers) are none.
   */
  async enqueue(queue: Queue, name: string, data: unknown, options?: JobsOptions): Promise<ClientResolution> {
    const opts = asBullMQReads(options);
    const definition = this.definitionOf(queue, name);
    this.failIfLoginRefused(definition);
    const connected = this.deps.availability.ready(queue);
    if (connected) await connected;
    if (!definition) {
      return { result: { status: 'enqueued', job: await this.deps.queues.originals(queue).add(name, data, opts) } };
    }
    return this.deps.tracer.run(
      'enqueue',
      { queue: queue.name, jobName: name, lock: definition.options.lock },
      async (annotate) => {
        const digest = digestAtEnqueue(definition, queue, name, data, opts);
        annotate({ digest });
        const taken = await this.lockAndAdd(queue, definition, name, data, opts, digest);
        return this.settle(queue, definition, { name, data, opts }, digest, taken);
      },
    );
  }

  /**
   * Enqueues many jobs. Jobs whose enqueue lock rides inside BullMQ's add go to Redis in one `addBulk`; the others are
   * locked one by one. Every digest is computed first, so a bad entry enqueues nothing.
   */
  enqueueBulk(queue: Queue, jobs: readonly BulkJob[]): Promise<ClientResolution[]> {
    if (!this.deps.tracer.active || !jobs.some((entry) => this.definitionOf(queue, entry.name))) {
      return this.bulkEnqueue(queue, jobs);
    }
    return this.deps.tracer.run('enqueueBulk', { queue: queue.name, jobs: jobs.length }, () =>
      this.bulkEnqueue(queue, jobs),
    );
  }

  /**
   * `queue.add` as users call it: the strategy decides between returning a handle of the existing job and throwing. A
   * duplicate costs one round trip, as with BullMQ's own deduplication, whose convention this follows: the `Job`
   * returned is built locally, with the id of the job that holds the lock and the name, data and options passed to
   * this call (not the holder's); read the holder with `queue.getJob(job.id)` when you need it.
   */
  async add(queue: Queue, name: string, data: unknown, options?: JobsOptions): Promise<Job<unknown, unknown>> {
    const opts = options ?? {}; // read as BullMQ reads it by `enqueue`
    return this.toJob(queue, { name, data, opts }, await this.enqueue(queue, name, data, opts));
  }

  /** `queue.addBulk` as users call it; throws the first strategy error after every other job was handled. */
  async addBulk(queue: Queue, jobs: BulkJob[]): Promise<Job<unknown, unknown>[]> {
    const resolutions = await this.enqueueBulk(queue, jobs);
    const failure = resolutions.find((r) => r.error);
    if (failure?.error) throw failure.error;
    return resolutions.map((resolution, i) => this.toJob(queue, jobs[i], resolution));
  }

  private async lockAndAdd(
    queue: Queue,
    definition: JobDefinition,
    name: string,
    data: unknown,
    opts: JobsOptions,
    digest: string,
  ): Promise<Taken> {
    const { add } = this.deps.queues.originals(queue);
    if (!definition.enqueueLock) return { job: await add(name, data, runtimeOnlyOpts(definition, opts)) };
    const jobId = opts.jobId ?? newJobId();
    const { events } = this.deps;
    return takeEnqueueLock(
      definition,
      { queue, name, data, opts, digest, jobId, reported: events.observes('locked') },
      add,
      events,
    );
  }

  /**
   * Every entry is readied first (digests computed, so a bad one enqueues nothing; locks taken where they are not
   * taken inside BullMQ's add), then the whole bulk is one `addBulk`. BullMQ sends it as a pipeline, not a transaction:
   * if it fails, the entries it added keep their locks and the others' are given back. A bulk of many entries whose
   * locks are taken before the add announces itself until the add is done ({@link BulksInProgress}).
   */
  private async bulkEnqueue(queue: Queue, jobs: readonly BulkJob[]): Promise<ClientResolution[]> {
    const reported = this.deps.events.observes('locked');
    const requests = jobs.map((job): BulkRequest => {
      const entry = { ...job, opts: asBullMQReads(job.opts) };
      const definition = this.definitionOf(queue, entry.name);
      return {
        entry,
        definition,
        digest: definition && digestAtEnqueue(definition, queue, entry.name, entry.data, entry.opts),
        reported,
      };
    });
    for (const request of requests) this.failIfLoginRefused(request.definition);
    const lease = announcedLease(requests);
    // An announcement that cannot be written (its key's server away, on a Cluster) leaves the bulk to the grace alone,
    // as a smaller one is: its own locks decide whether it can be enqueued.
    const end =
      lease === undefined ? undefined : await this.deps.bulks.begin(lease, requests.length).catch(() => undefined);
    let readied: { entries: BulkEntry[]; added: Job<unknown, unknown>[] };
    try {
      readied = await this.readyAndAdd(queue, requests);
    } finally {
      // Not awaited: the bulk is added (or failed) whatever becomes of its announcement, which its lease ends anyway
      // (a Redis out of reach right after the add would hold the caller's answer for as long as ioredis retries).
      void end?.();
    }
    const { entries, added } = readied;
    const results: ClientResolution[] = [];
    // A client strategy that throws (a custom one) fails the bulk, but only once every entry is settled: an entry after
    // it would keep a lock taken for a job BullMQ refused (an error code) until its lease ended.
    let thrown: { error: unknown } | undefined;
    let next = 0;
    // Producer job ids an entry of this bulk added: a later entry with one was answered by that job (BullMQ adds it once).
    const addedIds = new Set<string>();
    for (const e of entries) {
      if (e.kind === 'plain') {
        const job = added[next++];
        // A plain entry's job id counts too: a later unique entry with that id was answered by its job, no lock taken.
        if (e.entry.opts?.jobId !== undefined && job.id === e.entry.opts.jobId) addedIds.add(job.id);
        results.push({ result: { status: 'enqueued', job, ...(e.digest ? { digest: e.digest } : {}) } });
        continue;
      }
      let taken: Taken;
      if (e.kind === 'locked') {
        taken = await e.definition.enqueueLock!.settle(added[next++], e.request);
        const producerId = e.request.opts.jobId;
        if ('job' in taken && producerId !== undefined && addedIds.has(producerId))
          taken = { job: taken.job, existed: true };
        if ('job' in taken && !taken.existed) {
          if (reported) reportLocked(e.definition, e.request, this.deps.events);
          if (producerId !== undefined) addedIds.add(producerId);
        }
      } else {
        taken = { existingJobId: e.existingJobId };
      }
      const digest = e.kind === 'locked' ? e.request.digest : e.digest;
      try {
        results.push(await this.settle(queue, e.definition, e.entry, digest, taken));
      } catch (error) {
        thrown ??= { error };
      }
    }
    if (thrown) throw thrown.error;
    return results;
  }

  /** A bulk's entries readied, then added in one `addBulk`; if the add fails, the locks the entries took are given back. */
  private async readyAndAdd(
    queue: Queue,
    requests: readonly BulkRequest[],
  ): Promise<{ entries: BulkEntry[]; added: Job<unknown, unknown>[] }> {
    const { entries, abandon } = await readyBulk(queue, requests, (send) => writingTogether(this.deps.client, send));
    const bulk = entries.flatMap((e) => (e.kind === 'held' ? [] : [e.bulk]));
    try {
      return { entries, added: bulk.length > 0 ? await this.deps.queues.originals(queue).addBulk(bulk) : [] };
    } catch (error) {
      await abandon();
      throw error;
    }
  }

  /** The result of a lock taken (the job) or met (the client strategy decides). */
  private settle(
    queue: Queue,
    definition: JobDefinition,
    { name, data, opts }: BulkJob,
    digest: string,
    taken: Taken,
  ): Promise<ClientResolution> | ClientResolution {
    if ('job' in taken) return { result: { status: 'enqueued', job: taken.job, digest } };
    const conflict: ClientConflict = {
      side: 'client',
      queue,
      name,
      data,
      opts: opts ?? {},
      digest,
      existingJobId: taken.existingJobId,
      definition,
    };
    return definition.clientStrategy!.onClientConflict!(conflict, this.deps.tools);
  }

  private toJob(
    queue: Queue,
    { name, data, opts }: BulkJob,
    { result, error }: ClientResolution,
  ): Job<unknown, unknown> {
    if (error) throw error;
    if (result.status === 'enqueued') return result.job;
    return new Job(queue, name, data, opts ?? {}, result.existingJobId);
  }

  /**
   * Fails a unique job's enqueue, before anything is sent, while Redis refuses the login of the library's connection:
   * its lock, dead set and records could not be written (a job whose lock rides in BullMQ's add would get through with
   * the rest of the library out of order).
   */
  private failIfLoginRefused(definition: JobDefinition | undefined): void {
    const refused = definition && this.deps.availability.loginRefused();
    if (refused) throw refused;
  }

  private definitionOf(queue: Queue, name: string): JobDefinition | undefined {
    return this.deps.enabled ? this.deps.definitions.find(queue.name, name) : undefined;
  }
}

/**
 * The lease a bulk announces itself with ({@link BulksInProgress}): the shortest its locks taken before the add are
 * taken with (by these options: another deploy's may differ); `undefined` when it needs no announcement. The add of the
 * whole bulk comes after every lock: how long a lock waits for its job is the bulk's size, not the number of entries
 * locked first (one such entry among 100,000 plain ones waits for all of them).
 */
function announcedLease(requests: readonly BulkRequest[]): number | undefined {
  if (requests.length < ANNOUNCED_BULK_ENTRIES) return undefined;
  let shortest: number | undefined;
  for (const { digest, definition } of requests) {
    const lock = definition?.enqueueLock;
    if (digest !== undefined && lock?.takenBeforeAdd)
      shortest = Math.min(shortest ?? Infinity, lock.leaseBeforeAdd ?? 0);
  }
  return shortest;
}

function digestAtEnqueue(
  definition: JobDefinition,
  queue: Queue,
  name: string,
  data: unknown,
  opts: JobsOptions,
): string {
  if (opts.deduplication) {
    throw new UniqueJobsError(
      `Job "${name}" on queue "${queue.name}" sets BullMQ's "deduplication" option, but it is a unique job (${definition.source}): the library owns deduplication for it; drop the option`,
    );
  }
  return definition.digestOf({
    name,
    queueName: queue.name,
    data,
    opts,
    prefix: bullKeys.prefixOf(queue),
  });
}
