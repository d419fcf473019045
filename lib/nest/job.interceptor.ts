import type { ParkedRecordMarks } from '../redis/parked-record-marks.js';
import type { FlowProducer, Job, JobsOptions, Queue, QueueEvents, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { OperationTracer } from '../common/operation-tracer.js';
import type { ClientResolution, ConflictStrategy, ConflictTools } from '../conflicts/conflict-strategy.interface.js';
import { DeadSetService, type DeadSetBounds } from '../dead-set/dead-set.service.js';
import type { DeadSetEntry } from '../dead-set/dead-set-entry.interface.js';
import type { RedisLoginRefusedError } from '../errors/redis-login-refused.error.js';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { IdempotencyDefinitions } from '../idempotency/idempotency-definitions.js';
import type { IdempotencyRunner } from '../idempotency/idempotency.runner.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { JobInstrumentation } from '../interfaces/job-instrumentation.interface.js';
import { BulksInProgress } from '../locks/bulks-in-progress.js';
import type { LockStore } from '../locks/lock-store.js';
import { DEFAULT_DEAD_SET, DEFAULT_ENQUEUE_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT } from '../options/defaults.js';
import type { JobDefinitions } from '../options/job-definitions.js';
import { Enqueuer } from '../producer/enqueuer.js';
import { GuardedQueues, type AddBulkFn, type BulkJob } from '../producer/guarded-queues.js';
import { JobMovesGuard } from '../producer/job-moves.guard.js';
import { callerIdHolds, Replacer } from '../producer/replacer.js';
import { bullKeys, RESCHEDULES_FIELD, type UniqueJobsKeys } from '../redis/keys.js';
import { RedisAvailability } from '../redis/redis-availability.js';
import { QueueRegistry } from '../redis/queue-registry.js';
import type { RedisScripts } from '../redis/redis-scripts.js';
import { JobRunner, type ProcessFn } from '../worker/job-runner.js';
import type { AddFn } from '../locks/enqueue-lock.js';
import { asError } from '../errors/thrown.js';

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
  /** Where step jobs whose idempotency records are parked live (see `ParkedRecordMarks`). */
  parkedRecords?: ParkedRecordMarks;
  events: UniqueJobsEvents;
  logger: LoggerLike;
  enabled: boolean;
  deadSetBounds?: Partial<DeadSetBounds>;
  /** How long an enqueue waits for a connection that is not ready (ms), or `false`. Default 10 s. */
  enqueueTimeout?: number | false;
  /** How long a shutdown waits for an unreachable Redis before it disconnects (ms), or `false`. Default 5 s. */
  shutdownTimeout?: number | false;
  /** Whether `forRoot` names `client`'s connection (else BullModule.forRoot's): a refused login names the option. */
  connectionGiven?: boolean;
}

/**
 * The library's job interceptor: wires the producer side (`queue.add` → {@link Enqueuer}) and the worker side
 * (`process` → {@link JobRunner}) that the queue and worker guards route through it, with the conflict tools and the
 * dead set they share. It holds no lock logic of its own: that is in the lock types (lib/locks).
 */
export class JobInterceptor {
  /** Rejected duplicates. */
  readonly deadSet: DeadSetService;
  private readonly queues = new GuardedQueues();
  private readonly tracer = new OperationTracer();
  private readonly enqueuer: Enqueuer;
  private readonly runner: JobRunner;
  private readonly moves: JobMovesGuard;
  private readonly workers = new WeakSet<Worker>();
  private readonly availability: RedisAvailability;
  private readonly registry: QueueRegistry;

  constructor(private readonly deps: JobInterceptorDeps) {
    const { definitions, events, logger, client, strategies, enabled } = deps;
    this.deadSet = new DeadSetService(
      client,
      deps.scripts,
      deps.keys,
      { ...DEFAULT_DEAD_SET, ...deps.deadSetBounds },
      (entry) => this.requeue(entry),
      logger,
    );
    const replacer = new Replacer(definitions, this.queues, events, deps.store, deps.keys);
    const tools: ConflictTools = {
      logger,
      events,
      deadSet: this.deadSet,
      replaceExisting: (conflict) => replacer.replace(conflict),
      holderOf: async (conflict) => {
        const lock = definitions.find(conflict.queue.name, conflict.name)?.enqueueLock;
        // The caller's own jobId holding the lock (a hold that outlives its job) is what refuses the add: name it.
        if (lock && (await callerIdHolds(lock, conflict))) return conflict.opts.jobId;
        return lock?.holder(conflict.queue, conflict.digest);
      },
      strategy: (name) => strategies.get(name)!,
      countReschedule: (job) =>
        deps.store.jobs.countIn(bullKeys.job(job.queueQualifiedName, job.id!), RESCHEDULES_FIELD),
    };
    const tracer = this.tracer;
    this.availability = new RedisAvailability(logger, deps.enqueueTimeout ?? DEFAULT_ENQUEUE_TIMEOUT);
    this.availability.watchClient(client, deps.connectionGiven ?? true);
    const availability = this.availability;
    this.enqueuer = new Enqueuer({
      definitions,
      queues: this.queues,
      tools,
      events,
      tracer,
      enabled,
      availability,
      client,
      bulks: new BulksInProgress(deps.store, deps.keys),
    });
    this.runner = new JobRunner({
      ...deps,
      tools,
      tracer,
      reportError: (job, digest, error) => this.reportError(job, digest, error),
      loginRefused: () => this.availability.loginRefused() !== undefined,
    });
    this.moves = new JobMovesGuard(definitions, client, events, logger, enabled, deps);
    this.registry = new QueueRegistry(deps.scripts, deps.keys, (error) => {
      const message = error instanceof Error ? error.message : String(error);
      // Refused, not out of reach: the Redis user lacks a command the library runs (EVALSHA/EVAL: every lock beyond a
      // first job and every claim need them), or the library's keys.
      const command = /permissions to run the '([^']+)' command/i.exec(message)?.[1];
      if (message.includes('NOPERM') && command) {
        logger.error(
          `The Redis user may not run the command ${command.toUpperCase()}, which the library needs (${message}): grant it the ACL rule "+${command.toLowerCase()}" (docs/operations.md, "What the library needs of Redis")`,
        );
      } else if (message.includes('NOPERM')) {
        logger.error(
          `The Redis user may not write the library's keys (${message}): grant it the ACL rule "~${deps.keys.prefix}:*" (docs/operations.md, "What the library needs of Redis")`,
        );
      } else logger.debug?.(`Could not record a queue in the registry the CLI and the reaper read: ${message}`);
    });
  }

  /** Remembers a queue's own `add`/`addBulk` (guarded calls reach BullMQ through them) and guards its retries. */
  registerQueue(queue: Queue, add: AddFn, addBulk: AddBulkFn): void {
    this.queues.register(queue, { add, addBulk });
    this.availability.watch(queue);
    this.moves.install(queue);
    this.noteQueue(queue);
  }

  /**
   * Records a queue in the library's registry (once per process: a Set lookup after that). Also on every enqueue, so a
   * queue whose record failed at bootstrap is recorded by its first lock: the reaper finds a lock's job through it.
   */
  private noteQueue(queue: Pick<Queue, 'qualifiedName'>): void {
    if (this.deps.enabled) this.registry.note(queue.qualifiedName);
  }

  /** Follows a worker of a guarded processor: its jobs' ends (the lock types' `finished` hook) and their retries. */
  attachWorker(worker: Worker): void {
    if (this.workers.has(worker)) return;
    this.workers.add(worker);
    this.availability.watch(worker);
    this.moves.install(worker);
    this.noteQueue(worker);
    worker.on('failed', (job) => {
      // Only a job BullMQ failed for good has ended; a retried one comes back.
      if (job?.finishedOn) void this.runner.finished(job, 'failed');
      else if (job) void this.runner.retried(job);
    });
    worker.on('completed', (job) => void this.runner.finished(job, 'completed'));
  }

  /** The queues guarded for enqueue: name and key prefix (the reaper checks jobs there). */
  guardedQueues(): { name: string; prefix: string }[] {
    return this.queues.list();
  }

  /** Wraps enqueue and process (and their lock and idempotency phases) with an instrumentation: tracing. */
  instrument(instrumentation: JobInstrumentation): void {
    this.tracer.install(instrumentation);
  }

  /** {@link Enqueuer.enqueue} */
  enqueue(queue: Queue, name: string, data: unknown, opts?: JobsOptions): Promise<ClientResolution> {
    this.noteQueue(queue);
    return this.enqueuer.enqueue(queue, name, data, opts);
  }

  /** {@link Enqueuer.enqueueBulk} */
  enqueueBulk(queue: Queue, jobs: readonly BulkJob[]): Promise<ClientResolution[]> {
    this.noteQueue(queue);
    return this.enqueuer.enqueueBulk(queue, jobs);
  }

  /** `queue.add` of a guarded queue. */
  add(queue: Queue, name: string, data: unknown, opts?: JobsOptions): Promise<Job<unknown, unknown>> {
    this.noteQueue(queue);
    return this.enqueuer.add(queue, name, data, opts);
  }

  /** `queue.addBulk` of a guarded queue. */
  addBulk(queue: Queue, jobs: BulkJob[]): Promise<Job<unknown, unknown>[]> {
    this.noteQueue(queue);
    return this.enqueuer.addBulk(queue, jobs);
  }

  /** A guarded processor's `process`: {@link JobRunner.process}. */
  process(
    job: Job<unknown, unknown>,
    token: string | undefined,
    signal: AbortSignal | undefined,
    handler: ProcessFn,
    worker?: Worker,
  ) {
    return this.runner.process(job, token, signal, handler, worker);
  }

  /**
   * Starts what the worker side needs before its first job (bootstrap): the listener of waiting deliveries. Not waited
   * for: a Redis out of reach must not hold the bootstrap (the listener subscribes when it comes back).
   */
  start(): void {
    if (this.deps.idempotencyDefinitions.any) void this.deps.idempotency.listen();
  }

  /**
   * At bootstrap: the error of a refused login of the library's connection (`RedisLoginRefusedError`), as soon as Redis
   * answers it; `undefined` when it gets through, is out of reach (an outage: the application starts) or is silent for
   * `withinMs`.
   */
  loginSettled(withinMs: number): Promise<RedisLoginRefusedError | undefined> {
    return this.availability.loginSettled(withinMs);
  }

  /** Follows the connection of a flow producer or queue-events listener (outages logged once, let go at shutdown). */
  watchConnection(owner: FlowProducer | QueueEvents<unknown>): void {
    this.availability.watch(owner);
  }

  /** The application is shutting down: connections that stay out of reach are let go after `shutdownTimeout`. */
  shuttingDown(): void {
    this.availability.closeUnreachableAfter(
      this.deps.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT,
      () => this.runner.handlersRunning,
    );
  }

  /** Closes what the interceptor opened itself (the idempotency runner's listener), once the workers closed. */
  close(): Promise<void> {
    return this.deps.idempotency.close();
  }

  private async requeue(entry: DeadSetEntry): Promise<EnqueueResult> {
    const queue = this.queues.get(entry.queue, entry.bullPrefix);
    if (!queue) {
      const under = entry.bullPrefix === undefined ? '' : ` under BullMQ prefix "${entry.bullPrefix}"`;
      throw new UniqueJobsError(
        `Cannot retry dead-set entry ${entry.id}: queue "${entry.queue}"${under} is not registered in this application`,
      );
    }
    return (await this.enqueuer.enqueue(queue, entry.jobName, entry.data, entry.opts)).result;
  }

  private reportError(job: Job<unknown, unknown>, digest: string, error: unknown): void {
    const err = asError(error);
    // After the shutdown let go of an unreachable Redis, every active job's bookkeeping fails that way: the one line
    // the shutdown logged says so (the jobs come back as stalled); the events still tell each.
    const expected = this.availability.connectionsLetGo && /Connection is closed/.test(err.message);
    if (!expected) {
      this.deps.logger.error(`Lock bookkeeping for job ${job.id} (queue "${job.queueName}") failed: ${err.message}`);
    }
    this.deps.events.emit({
      type: 'error',
      queue: job.queueName,
      jobName: job.name,
      digest,
      jobId: job.id,
      error: err,
    });
  }
}
