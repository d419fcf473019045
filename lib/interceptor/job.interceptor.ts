import { setTimeout as sleep } from 'node:timers/promises';
import { Job, UnrecoverableError, type JobsOptions, type Queue, type Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { DeadSetService } from '../dead-set/dead-set.service.js';
import type { DeadSetEntry } from '../dead-set/dead-set-entry.interface.js';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
  ServerConflict,
} from '../interfaces/conflict-strategy.interface.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import { ContendedDigests } from '../locks/contended-digests.js';
import { LeaseKeeper } from '../locks/lease-keeper.js';
import type { AcquireResult, LockStore } from '../locks/lock-store.js';
import { deduplicationId, digestOfDeduplicationId, type UniqueJobsKeys } from '../redis/keys.js';
import type { RedisScripts } from '../redis/redis-scripts.js';
import { knownOnSameServer } from '../redis/same-server.js';
import { DEFAULT_DEAD_SET, DEFAULT_ENQUEUE_LEASE } from '../unique-jobs.options.js';
import type { JobDefinitions, ResolvedJobDefinition } from './job-definitions.js';
import type { IdempotencyDefinitions, ResolvedIdempotency } from '../idempotency/idempotency-definitions.js';
import type { IdempotencyRunner } from '../idempotency/idempotency.runner.js';
import type { LoggerLike } from './logger.js';
import type {
  AnnotateOperation,
  JobInstrumentation,
  JobOperation,
  JobOperationAttributes,
} from '../tracing/job-instrumentation.interface.js';
import { newJobId } from './job-ids.js';
import { workerConnection } from './worker-connection.js';
import { willRunAgain } from './will-run-again.js';

/**
 * What the library stores on the options of a job locked on the general path: the digest, fixed at enqueue. (A job on
 * the fast path carries its digest in BullMQ's deduplication id, so it needs no marker: every byte of job options costs
 * enqueue throughput.)
 */
export interface UniqueJobMarker {
  digest: string;
}

/** The job options field holding {@link UniqueJobMarker}. */
export const MARKER_FIELD = 'uniqueJobs';

/** A job bulk entry as `Queue#addBulk` takes it. */
export interface BulkJob {
  name: string;
  data: unknown;
  opts?: JobsOptions;
}

type AddFn = (name: string, data: unknown, opts?: JobsOptions) => Promise<Job>;
type AddBulkFn = (jobs: BulkJob[]) => Promise<Job[]>;
type Processor = (job: Job, token?: string, signal?: AbortSignal) => Promise<unknown>;

/** Everything the interceptor works with, built by the module. */
export interface JobInterceptorDeps {
  definitions: JobDefinitions;
  idempotencyDefinitions: IdempotencyDefinitions;
  idempotency: IdempotencyRunner;
  strategies: ReadonlyMap<string, ConflictStrategy>;
  client: Redis | Cluster;
  scripts: RedisScripts;
  store: LockStore;
  keys: UniqueJobsKeys;
  events: UniqueJobsEvents;
  logger: LoggerLike;
  enabled: boolean;
  deadSetBounds?: { maxSize?: number; maxAge?: number };
}

type LockAndAdd = { job: Job } | { existingJobId: string | undefined };

/** A bulk entry, sorted by how it is enqueued. */
type PreparedBulkJob =
  | { kind: 'plain'; entry: BulkJob; digest?: string; bulk: BulkJob }
  | {
      kind: 'deduplicated';
      entry: BulkJob;
      definition: ResolvedJobDefinition;
      digest: string;
      jobId: string;
      bulk: BulkJob;
    }
  | { kind: 'semaphore'; entry: BulkJob; definition: ResolvedJobDefinition; digest: string };

/**
 * The one place where locks are taken and released and conflicts are handled, for both sides:
 * `enqueue` (producer → digest → lock → queue) and `process` (worker → lock → handler → release).
 * Queues and processors are wired to it by the queue and worker guards.
 */
export class JobInterceptor {
  /** Rejected duplicates. */
  readonly deadSet: DeadSetService;
  /** Guarded queues by name (to retry dead entries) and each queue's own add/addBulk. */
  private readonly queues = new Map<string, Queue>();
  private readonly originalMethods = new WeakMap<Queue, { add: AddFn; addBulk: AddBulkFn }>();
  private readonly tools: ConflictTools;
  /** Fast-path lock keys recently found held: their duplicates are answered by a read, not a whole add. */
  private readonly contended = new ContendedDigests();
  /** Jobs whose failure {@link process} handled (so the worker's `failed` event needs nothing more). */
  private readonly failedInProcess = new WeakSet<Job>();
  /** Tracing of enqueue and process (see lib/tracing), when installed. */
  private instrumentation: JobInstrumentation | undefined;

  constructor(private readonly deps: JobInterceptorDeps) {
    this.deadSet = new DeadSetService(
      deps.client,
      deps.scripts,
      deps.keys,
      { ...DEFAULT_DEAD_SET, ...deps.deadSetBounds },
      (entry) => this.requeue(entry),
    );
    this.tools = {
      logger: deps.logger,
      events: deps.events,
      deadSet: this.deadSet,
      replaceExisting: (conflict) => this.replaceExisting(conflict),
      strategy: (name) => deps.strategies.get(name)!,
      countReschedule: (job) => deps.client.hincrby(queueKey(job, job.id!), 'ujReschedules', 1),
    };
  }

  /** Remembers a queue's own `add`/`addBulk`, so guarded calls reach BullMQ (and dead entries can be retried). */
  registerQueue(queue: Queue, add: AddFn, addBulk: AddBulkFn): void {
    this.queues.set(queue.name, queue);
    this.originalMethods.set(queue, { add, addBulk });
  }

  /** The queues guarded for enqueue: name and key prefix (the reaper checks jobs there). */
  guardedQueues(): { name: string; prefix: string }[] {
    return [...this.queues.values()].map((queue) => ({ name: queue.name, prefix: queue.opts.prefix ?? 'bull' }));
  }

  /** Wraps enqueue and process (and their lock and idempotency phases) with an instrumentation: tracing. */
  instrument(instrumentation: JobInstrumentation): void {
    this.instrumentation = instrumentation;
  }

  // ───────────────────────────── enqueue (client side) ─────────────────────────────

  /**
   * Enqueues a job under its uniqueness rules. Resolves what happened; `error` is what plain `queue.add` throws
   * (the `raise` strategy). Nothing is enqueued when the lock arguments cannot be hashed.
   */
  async enqueue(queue: Queue, name: string, data: unknown, opts: JobsOptions = {}): Promise<ClientResolution> {
    const { add } = this.originals(queue);
    const definition = this.definitionOf(queue.name, name);
    if (!definition) return { result: { status: 'enqueued', job: await add(name, data, opts) } };
    return this.instrumented(
      'enqueue',
      { queue: queue.name, jobName: name, lock: definition.options.lock },
      (annotate) => this.enqueueUnique(queue, definition, name, data, opts, annotate),
    );
  }

  private async enqueueUnique(
    queue: Queue,
    definition: ResolvedJobDefinition,
    name: string,
    data: unknown,
    opts: JobsOptions,
    annotate: AnnotateOperation,
  ): Promise<ClientResolution> {
    const { add } = this.originals(queue);
    const digest = this.digestAtEnqueue(definition, queue, name, data, opts);
    annotate({ digest });
    if (!definition.lock.locksAtEnqueue) {
      const job = await add(name, data, runtimeOnlyOpts(definition, opts));
      return { result: { status: 'enqueued', job, digest } };
    }
    const outcome = await this.lockAndAdd(queue, definition, name, data, opts, digest);
    if ('job' in outcome) return { result: { status: 'enqueued', job: outcome.job, digest } };
    return this.clientConflict({
      side: 'client',
      queue,
      name,
      data,
      opts,
      digest,
      existingJobId: outcome.existingJobId,
      definition,
    });
  }

  /**
   * Enqueues many jobs. Jobs whose enqueue lock rides on BullMQ's deduplication go to Redis in one `addBulk`; the
   * others are locked one by one. Every digest is computed first, so a bad entry enqueues nothing.
   */
  async enqueueBulk(queue: Queue, jobs: readonly BulkJob[]): Promise<ClientResolution[]> {
    if (!this.instrumentation || !jobs.some((entry) => this.definitionOf(queue.name, entry.name))) {
      return this.bulkEnqueue(queue, jobs);
    }
    return this.instrumented('enqueueBulk', { queue: queue.name, jobs: jobs.length }, () =>
      this.bulkEnqueue(queue, jobs),
    );
  }

  private async bulkEnqueue(queue: Queue, jobs: readonly BulkJob[]): Promise<ClientResolution[]> {
    const { addBulk } = this.originals(queue);
    const prepared = jobs.map((entry): PreparedBulkJob => {
      const opts = entry.opts ?? {};
      const definition = this.definitionOf(queue.name, entry.name);
      if (!definition) return { kind: 'plain', entry, bulk: entry };
      const digest = this.digestAtEnqueue(definition, queue, entry.name, entry.data, opts);
      if (!definition.lock.locksAtEnqueue) {
        return { kind: 'plain', entry, digest, bulk: { ...entry, opts: runtimeOnlyOpts(definition, opts) } };
      }
      if (definition.enqueueLockPath === 'semaphore') return { kind: 'semaphore', entry, definition, digest };
      const jobId = opts.jobId ?? newJobId();
      const bulk = { ...entry, opts: this.deduplicationOpts(queue, definition, opts, digest, jobId) };
      return { kind: 'deduplicated', entry, definition, digest, jobId, bulk };
    });
    const bulk = prepared.flatMap((p) => (p.kind === 'semaphore' ? [] : [p.bulk]));
    const added = bulk.length > 0 ? await addBulk(bulk) : [];
    const results: ClientResolution[] = [];
    let next = 0;
    for (const p of prepared) {
      if (p.kind === 'plain') {
        results.push({ result: { status: 'enqueued', job: added[next++], ...(p.digest ? { digest: p.digest } : {}) } });
        continue;
      }
      const { entry, definition, digest } = p;
      const opts = entry.opts ?? {};
      let outcome: LockAndAdd;
      if (p.kind === 'deduplicated') {
        outcome = this.settleDeduplicatedAdd(added[next++], p.jobId);
        if ('job' in outcome) this.emitLocked(definition, entry.name, digest, p.jobId);
      } else {
        outcome = await this.lockAndAdd(queue, definition, entry.name, entry.data, opts, digest);
      }
      if ('job' in outcome) {
        results.push({ result: { status: 'enqueued', job: outcome.job, digest } });
        continue;
      }
      const conflict: ClientConflict = {
        side: 'client',
        queue,
        name: entry.name,
        data: entry.data,
        opts,
        digest,
        existingJobId: outcome.existingJobId,
        definition,
      };
      results.push(await this.clientConflict(conflict));
    }
    return results;
  }

  /** `queue.add` as users call it: the strategy decides between returning the existing job and throwing. */
  async add(queue: Queue, name: string, data: unknown, opts?: JobsOptions): Promise<Job> {
    return this.toJob(queue, name, data, opts, await this.enqueue(queue, name, data, opts));
  }

  /** `queue.addBulk` as users call it; throws the first strategy error after every other job was handled. */
  async addBulk(queue: Queue, jobs: BulkJob[]): Promise<Job[]> {
    const resolutions = await this.enqueueBulk(queue, jobs);
    const failure = resolutions.find((r) => r.error);
    if (failure?.error) throw failure.error;
    return Promise.all(resolutions.map((r, i) => this.toJob(queue, jobs[i].name, jobs[i].data, jobs[i].opts, r)));
  }

  private digestAtEnqueue(
    definition: ResolvedJobDefinition,
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
    return definition.digestOf({ name, queueName: queue.name, data, opts });
  }

  /** Takes the enqueue lock and adds the job; one Redis call on the deduplication path. */
  private async lockAndAdd(
    queue: Queue,
    definition: ResolvedJobDefinition,
    name: string,
    data: unknown,
    opts: JobsOptions,
    digest: string,
  ): Promise<LockAndAdd> {
    const { add } = this.originals(queue);
    const jobId = opts.jobId ?? newJobId();
    if (definition.enqueueLockPath === 'deduplication') {
      const lockKey = `${queue.qualifiedName}:de:${deduplicationId(digest)}`;
      if (opts.jobId === undefined && this.contended.has(lockKey)) {
        const holder = await this.deps.store.peekDeduplication(lockKey, `${queue.qualifiedName}:`);
        if (holder !== undefined) return { existingJobId: holder };
        this.contended.delete(lockKey);
      }
      const outcome = this.settleDeduplicatedAdd(
        await add(name, data, this.deduplicationOpts(queue, definition, opts, digest, jobId)),
        jobId,
      );
      if ('job' in outcome) this.emitLocked(definition, name, digest, jobId);
      else this.contended.add(lockKey);
      return outcome;
    }
    const key = this.deps.keys.enqueueLock(digest, definition.options.lock);
    const lease = (definition.options.lockTtl ?? DEFAULT_ENQUEUE_LEASE) + delayOf(queue, opts);
    const held = await this.deps.store.acquire(key, jobId, lease, definition.options.lockLimit);
    if (!held.acquired) return { existingJobId: held.holder };
    try {
      const job = await add(name, data, withMarker({ ...opts, jobId }, digest));
      this.emitLocked(definition, name, digest, jobId);
      return { job };
    } catch (error) {
      await this.deps.store.release(key, jobId).catch(() => undefined);
      throw error;
    }
  }

  private deduplicationOpts(
    queue: Queue,
    definition: ResolvedJobDefinition,
    opts: JobsOptions,
    digest: string,
    jobId: string,
  ): JobsOptions {
    const ttl = definition.options.lockTtl;
    return {
      ...opts,
      jobId,
      deduplication: {
        id: deduplicationId(digest),
        ...(ttl === undefined ? {} : { ttl: ttl + delayOf(queue, opts) }),
      },
    };
  }

  /** BullMQ answers a deduplicated add with the existing job's id instead of the one we chose. */
  private settleDeduplicatedAdd(job: Job, jobId: string | undefined): LockAndAdd {
    return job.id === jobId ? { job } : { existingJobId: job.id };
  }

  private clientConflict(conflict: ClientConflict): Promise<ClientResolution> {
    return conflict.definition.clientStrategy!.onClientConflict!(conflict, this.tools);
  }

  /**
   * For `replace`: removes the holder if it never started, then adds the job in its place (and lock). A holder that is
   * running, finished (an `until_expired` period), waiting for a retry, gone, or in another queue is left alone:
   * `undefined` lets the strategy fall back.
   */
  private async replaceExisting(conflict: ClientConflict): Promise<EnqueueResult | undefined> {
    const { queue, definition, digest, name, data, opts } = conflict;
    let holder = conflict.existingJobId;
    for (let attempt = 0; attempt < 3 && holder !== undefined; attempt++) {
      if (!(await removeIfNotStarted(queue, holder))) return undefined;
      if (definition.enqueueLockPath === 'semaphore') {
        await this.deps.store.release(this.deps.keys.enqueueLock(digest, definition.options.lock), holder);
      }
      const outcome = await this.lockAndAdd(queue, definition, name, data, opts, digest);
      if ('job' in outcome) {
        this.deps.events.emit({
          type: 'replaced',
          queue: definition.queue,
          jobName: name,
          digest,
          jobId: outcome.job.id!,
          replacedJobId: holder,
        });
        return { status: 'enqueued', job: outcome.job, digest, replacedJobId: holder };
      }
      holder = outcome.existingJobId; // another producer got in between: replace that one
    }
    return undefined;
  }

  private async toJob(
    queue: Queue,
    name: string,
    data: unknown,
    opts: JobsOptions | undefined,
    { result, error }: ClientResolution,
  ): Promise<Job> {
    if (error) throw error;
    if (result.status === 'enqueued') return result.job;
    const existing = result.existingJobId ? await Job.fromId(queue, result.existingJobId) : undefined;
    return existing ?? new Job(queue, name, data, opts, result.existingJobId);
  }

  private async requeue(entry: DeadSetEntry): Promise<EnqueueResult> {
    const queue = this.queues.get(entry.queue);
    if (!queue) {
      throw new UniqueJobsError(
        `Cannot retry dead-set entry ${entry.id}: queue "${entry.queue}" is not registered in this application`,
      );
    }
    return (await this.enqueue(queue, entry.jobName, entry.data, entry.opts)).result;
  }

  // ───────────────────────────── process (server side) ─────────────────────────────

  /** Runs a job's handler inside its locks, then under its idempotency key. */
  async process(
    job: Job,
    token: string | undefined,
    signal: AbortSignal | undefined,
    handler: Processor,
    worker?: Worker,
  ): Promise<unknown> {
    const keyed = this.deps.enabled ? this.deps.idempotencyDefinitions.find(job.queueName, job.name) : undefined;
    const definition = this.definitionOf(job.queueName, job.name);
    if (!keyed && !definition) return handler(job, token, signal);
    // Only jobs that settle something after the handler need the worker's connection.
    const settles = keyed !== undefined || definition?.lock.locksWhileRunning === true;
    const connection = settles ? workerConnection(worker) : undefined;
    return this.instrumented(
      'process',
      { queue: job.queueName, jobName: job.name, ...(definition ? { lock: definition.options.lock } : {}) },
      (annotate) => this.processGuarded(job, token, signal, handler, keyed, definition, connection, annotate),
    );
  }

  /**
   * `connection`: the one the worker records the job's outcome on, when known. A write that must land before that
   * outcome (releasing the run-time lock, completing the idempotency record) is sent on it without waiting for its
   * answer, when it reaches the server the write is for: it costs no round trip of its own (docs/performance.md).
   */
  private async processGuarded(
    job: Job,
    token: string | undefined,
    signal: AbortSignal | undefined,
    handler: Processor,
    keyed: ResolvedIdempotency | undefined,
    definition: ResolvedJobDefinition | undefined,
    connection: Redis | undefined,
    annotate: AnnotateOperation,
  ): Promise<unknown> {
    const run: Processor = keyed
      ? (j, t, s) =>
          this.instrumented('idempotency', { queue: j.queueName, jobName: j.name, store: keyed.store.name }, () =>
            this.deps.idempotency.run(keyed, j, t, s, handler, connection),
          )
      : handler;
    if (!definition) return run(job, token, signal);
    const lockedDigest = enqueueLockDigest(job);
    const digest = lockedDigest ?? this.digestInWorker(definition, job);
    annotate({ digest });
    const { lock } = definition;
    const holdsEnqueueLock = lock.locksAtEnqueue && lockedDigest !== undefined;
    const jobId = job.id!;

    let runtimeKey: string | undefined;
    let lockedAt = 0;
    if (lock.locksWhileRunning) {
      const key = (runtimeKey = this.deps.keys.runtimeLock(digest));
      const waitFrom = Date.now();
      const held = await this.instrumented(
        'runtimeLock',
        { queue: job.queueName, jobName: job.name, digest },
        async (annotateLock) => {
          const outcome = await this.acquireRuntimeLock(key, jobId, definition);
          annotateLock({ acquired: outcome.acquired });
          return outcome;
        },
      );
      if (!held.acquired) {
        return this.serverConflict(
          { side: 'server', job, token, digest, existingJobId: held.holder, definition },
          holdsEnqueueLock,
        );
      }
      lockedAt = Date.now();
      this.deps.events.emit({
        type: 'locked',
        lock: 'runtime',
        queue: job.queueName,
        jobName: job.name,
        digest,
        jobId,
        waitedMs: lockedAt - waitFrom,
      });
    }
    const keeper = runtimeKey ? this.keepLease(runtimeKey, job, definition, digest) : undefined;
    try {
      if (holdsEnqueueLock && lock.releaseEnqueueLock === 'on-start') {
        await this.releaseEnqueueLock(job, definition, digest);
      }
      const result = await run(job, token, signal);
      if (holdsEnqueueLock && lock.releaseEnqueueLock === 'on-finish') {
        await this.quietly(job, digest, () => this.releaseEnqueueLock(job, definition, digest, 'finish'));
      }
      return result;
    } catch (error) {
      this.failedInProcess.add(job);
      if (holdsEnqueueLock) {
        await this.quietly(job, digest, () => this.afterFailedAttempt(job, definition, digest, error));
      }
      throw error;
    } finally {
      keeper?.stop();
      // A lease that ended under the handler (an event-loop stall, or Redis out of reach, longer than the lease) is lost
      // even when no renewal answer said so: the handler may have returned before the next renewal was sent.
      if (keeper?.expired) keeper.reportLost();
      if (runtimeKey) {
        const inOrderOn = connection && knownOnSameServer(this.deps.client, connection) ? connection : undefined;
        const released = this.quietly(job, digest, async () => {
          if (await this.deps.store.release(runtimeKey, jobId, inOrderOn)) {
            this.deps.events.emit({
              type: 'unlocked',
              lock: 'runtime',
              queue: job.queueName,
              jobName: job.name,
              digest,
              jobId,
              heldMs: Date.now() - lockedAt,
            });
          }
        });
        if (!inOrderOn) await released;
      }
    }
  }

  /**
   * The digest of a job that took no enqueue lock (a run-time lock only, or a job added without the library). The data
   * is what the producer stored, so it is the digest the producer computed. Lock arguments that cannot be hashed will
   * never be hashable: the job fails for good instead of retrying.
   */
  private digestInWorker(definition: ResolvedJobDefinition, job: Job): string {
    try {
      return definition.digestOf(job);
    } catch (error) {
      if (error instanceof UnserializableLockArgsError) throw new UnrecoverableError(error.message);
      throw error;
    }
  }

  /**
   * A job failed (the worker's `failed` event). A final failure reports the fast-path lock BullMQ deleted with it. A
   * job that failed without passing through {@link process} (BullMQ fails a job that stalled or started too often
   * before calling the processor) also gets its enqueue lock released (owner-checked), so a dead job never blocks its
   * digest.
   */
  async afterWorkerFailure(job: Job): Promise<void> {
    const handled = this.failedInProcess.delete(job);
    if (!job.finishedOn) return;
    this.reportReleasedWithJob(job);
    if (handled) return;
    const definition = this.definitionOf(job.queueName, job.name);
    const digest = enqueueLockDigest(job);
    if (!definition || digest === undefined || definition.lock.releaseEnqueueLock === 'on-expiry') return;
    await this.quietly(job, digest, () => this.releaseEnqueueLock(job, definition, digest, 'finish'));
  }

  /** A job completed (the worker's `completed` event). */
  afterWorkerCompletion(job: Job): void {
    this.reportReleasedWithJob(job);
  }

  /** Waits up to `lockTimeout` for a run-time lock, backing off (25 ms doubling to 1 s) rather than polling hot. */
  private async acquireRuntimeLock(
    key: string,
    owner: string,
    definition: ResolvedJobDefinition,
  ): Promise<AcquireResult> {
    const { lockTimeout, runtimeLockLease, lockLimit } = definition.options;
    const deadline = Date.now() + lockTimeout;
    let wait = 25;
    for (;;) {
      const held = await this.deps.store.acquire(key, owner, runtimeLockLease, lockLimit);
      const left = deadline - Date.now();
      if (held.acquired || left <= 0) return held;
      await sleep(Math.min(wait, left));
      wait = Math.min(wait * 2, 1000);
    }
  }

  private keepLease(key: string, job: Job, definition: ResolvedJobDefinition, digest: string): LeaseKeeper {
    const { runtimeLockLease } = definition.options;
    return new LeaseKeeper(() => this.deps.store.renew(key, job.id!, runtimeLockLease), runtimeLockLease, {
      lost: () => {
        this.deps.logger.error(
          `Run-time lock of job ${job.id} (queue "${job.queueName}", digest ${digest}) was lost: its lease ended before it was renewed, so a duplicate may run concurrently`,
        );
        this.deps.events.emit({ type: 'lockLost', queue: job.queueName, jobName: job.name, digest, jobId: job.id! });
      },
      error: (error) => this.reportError(job, digest, error),
    });
  }

  private async serverConflict(conflict: ServerConflict, holdsEnqueueLock: boolean): Promise<unknown> {
    const { job, definition, digest } = conflict;
    try {
      const value = await definition.serverStrategy!.onServerConflict!(conflict, this.tools);
      if (holdsEnqueueLock)
        await this.quietly(job, digest, () => this.releaseEnqueueLock(job, definition, digest, 'finish'));
      return value;
    } catch (error) {
      this.failedInProcess.add(job);
      if (holdsEnqueueLock && !willRunAgain(job, error)) {
        await this.quietly(job, digest, () => this.releaseEnqueueLock(job, definition, digest, 'finish'));
      }
      throw error;
    }
  }

  /** A failed attempt: the job waits for a retry (keep / take back the lock) or dies (release it). */
  private async afterFailedAttempt(
    job: Job,
    definition: ResolvedJobDefinition,
    digest: string,
    error: unknown,
  ): Promise<void> {
    const { lock, options } = definition;
    if (willRunAgain(job, error)) {
      if (!lock.relockOnRetry) return;
      if (definition.enqueueLockPath === 'deduplication') {
        await this.deps.store.relockDeduplication(
          queueKey(job, `de:${deduplicationId(digest)}`),
          job.id!,
          options.lockTtl,
          queueKey(job, ''),
        );
      } else {
        await this.deps.store.acquire(
          this.deps.keys.enqueueLock(digest, definition.options.lock),
          job.id!,
          options.lockTtl ?? DEFAULT_ENQUEUE_LEASE,
          options.lockLimit,
        );
      }
    } else if (lock.releaseEnqueueLock === 'on-finish') {
      await this.releaseEnqueueLock(job, definition, digest, 'finish');
    }
  }

  /**
   * Releases the job's own enqueue lock (compare-and-delete on the job id). A deduplication key without TTL needs no
   * call when the job finishes: BullMQ deletes it in the same script that moves the job to completed or failed.
   */
  private async releaseEnqueueLock(
    job: Job,
    definition: ResolvedJobDefinition,
    digest: string,
    when: 'start' | 'finish' = 'start',
  ): Promise<void> {
    let released: boolean;
    if (definition.enqueueLockPath === 'deduplication') {
      if (when === 'finish' && definition.options.lockTtl === undefined) return;
      released = await job.removeDeduplicationKey();
    } else {
      released = await this.deps.store.release(this.deps.keys.enqueueLock(digest, definition.options.lock), job.id!);
    }
    if (released) this.emitEnqueueUnlocked(job, digest);
  }

  private emitEnqueueUnlocked(job: Job, digest: string): void {
    this.deps.events.emit({
      type: 'unlocked',
      lock: 'enqueue',
      queue: job.queueName,
      jobName: job.name,
      digest,
      jobId: job.id!,
      heldMs: Math.max(0, Date.now() - job.timestamp),
    });
  }

  /**
   * A fast-path enqueue lock without TTL released `on-finish` is deleted by BullMQ itself, in the script that moves the
   * job to completed or failed: reported here, from the worker's event, once the key is gone.
   */
  private reportReleasedWithJob(job: Job): void {
    const definition = this.definitionOf(job.queueName, job.name);
    const digest = digestOfDeduplicationId(job.deduplicationId);
    if (
      !definition?.lock.locksAtEnqueue ||
      definition.enqueueLockPath !== 'deduplication' ||
      definition.lock.releaseEnqueueLock !== 'on-finish' ||
      definition.options.lockTtl !== undefined ||
      digest === undefined
    ) {
      return;
    }
    this.emitEnqueueUnlocked(job, digest);
  }

  /** Runs a bookkeeping step whose failure must not change the job's outcome; the failure is reported. */
  private async quietly(job: Job, digest: string, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (error) {
      this.reportError(job, digest, error);
    }
  }

  private reportError(job: Job, digest: string, error: unknown): void {
    const err = error instanceof Error ? error : new Error(String(error));
    this.deps.logger.error(`Lock bookkeeping for job ${job.id} (queue "${job.queueName}") failed: ${err.message}`);
    this.deps.events.emit({
      type: 'error',
      queue: job.queueName,
      jobName: job.name,
      digest,
      jobId: job.id,
      error: err,
    });
  }

  // ───────────────────────────── shared ─────────────────────────────

  private definitionOf(queue: string, name: string): ResolvedJobDefinition | undefined {
    return this.deps.enabled ? this.deps.definitions.find(queue, name) : undefined;
  }

  private originals(queue: Queue): { add: AddFn; addBulk: AddBulkFn } {
    return (
      this.originalMethods.get(queue) ?? {
        add: (name, data, opts) => queue.add(name, data, opts),
        addBulk: (jobs) => queue.addBulk(jobs),
      }
    );
  }

  /** Runs an operation through the instrumentation (tracing), or directly when there is none. */
  private instrumented<T>(
    operation: JobOperation,
    attributes: JobOperationAttributes,
    work: (annotate: AnnotateOperation) => Promise<T>,
  ): Promise<T> {
    return this.instrumentation ? this.instrumentation.run(operation, attributes, work) : work(ignoreAnnotation);
  }

  private emitLocked(definition: ResolvedJobDefinition, jobName: string, digest: string, jobId: string): void {
    this.deps.events.emit({ type: 'locked', lock: 'enqueue', queue: definition.queue, jobName, digest, jobId });
  }
}

const ignoreAnnotation: AnnotateOperation = () => undefined;

/**
 * Options of a job with a run-time lock only (its digest is computed again in the worker, from the same data). The
 * lock's owner is the job id; unique across queues, the id must not repeat on another queue, as BullMQ's counter ids
 * ("1", "2", …) do, so such a job gets an id of the library's unless the caller chose one.
 */
function runtimeOnlyOpts(definition: ResolvedJobDefinition, opts: JobsOptions): JobsOptions {
  const acrossQueues = definition.options.uniqueAcross.includes('queues') && opts.jobId === undefined;
  return acrossQueues ? { ...opts, jobId: newJobId() } : opts;
}

/** The digest of the enqueue lock a job took: from its BullMQ deduplication id (fast path) or its marker. */
function enqueueLockDigest(job: Job): string | undefined {
  const fromDeduplication = digestOfDeduplicationId(job.deduplicationId);
  if (fromDeduplication !== undefined) return fromDeduplication;
  return (job.opts[MARKER_FIELD as keyof JobsOptions] as UniqueJobMarker | undefined)?.digest;
}

/** Removes a job of this queue that never started (waiting, delayed or prioritized, no attempt begun). */
async function removeIfNotStarted(queue: Queue, jobId: string): Promise<boolean> {
  const job = await Job.fromId(queue, jobId);
  if (!job || job.attemptsStarted > 0) return false;
  const state = await job.getState();
  if (state !== 'waiting' && state !== 'delayed' && state !== 'prioritized') return false;
  return (await queue.remove(jobId)) === 1; // 0: it became active meanwhile
}

/** Job options with the library's marker (the digest, fixed at enqueue). */
function withMarker(opts: JobsOptions, digest: string): JobsOptions {
  return { ...opts, [MARKER_FIELD]: { digest } satisfies UniqueJobMarker } as JobsOptions;
}

/** A key in the job's queue key space (`<prefix>:<queue>:<suffix>`), as BullMQ builds them. */
function queueKey(job: Job, suffix: string): string {
  return `${job.queueQualifiedName}:${suffix}`;
}

function delayOf(queue: Queue, opts: JobsOptions): number {
  return Math.max(opts.delay ?? queue.defaultJobOptions?.delay ?? 0, 0);
}
