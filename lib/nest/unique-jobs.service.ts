import { Inject, Injectable } from '@nestjs/common';
import type { JobsOptions, Queue } from 'bullmq';
import type { Observable } from 'rxjs';
import type { DeadSetService } from '../dead-set/dead-set.service.js';
import type { UniqueJobEvent } from '../events/unique-job-event.interface.js';
import { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { queuePrefixOf } from './queue-prefix.js';
import type { EnqueueResult } from '../interfaces/enqueue-result.interface.js';
import type { BulkJob } from '../producer/guarded-queues.js';
import { JobInterceptor } from './job.interceptor.js';
import type { JobDefinitions } from '../options/job-definitions.js';
import { UniqueJobsQueueGuard } from './queue.guard.js';
import { UniqueJobsWorkerGuard } from './worker.guard.js';
import { UNIQUE_JOBS_DEFINITIONS } from './unique-jobs.constants.js';

/**
 * The library's public service: the explicit producer API (a typed result instead of a job or an exception), the dead
 * set, the event stream, and guarding queues created outside `BullModule.registerQueue`.
 */
@Injectable()
export class UniqueJobsService {
  constructor(
    private readonly interceptor: JobInterceptor,
    private readonly queueGuard: UniqueJobsQueueGuard,
    private readonly events: UniqueJobsEvents,
    @Inject(UNIQUE_JOBS_DEFINITIONS) private readonly definitions: JobDefinitions,
    private readonly workerGuard: UniqueJobsWorkerGuard,
  ) {}

  /**
   * Enqueues a job and says what happened: `{ status: 'enqueued', job }` or
   * `{ status: 'duplicate', existingJobId, strategy, digest, deadSetEntryId? }` ({@link DuplicateResult}). Never
   * throws for a duplicate (even with `raise`). `ResultType`
   * types the returned job's result (`enqueue<Order, Receipt>(…)`); `unknown` when not named.
   *
   * @throws UnserializableLockArgsError when the lock arguments cannot be hashed (nothing is enqueued).
   */
  async enqueue<DataType, ResultType = unknown>(
    queue: Queue,
    name: string,
    data: DataType,
    opts?: JobsOptions,
  ): Promise<EnqueueResult<DataType, ResultType>> {
    return (await this.interceptor.enqueue(queue, name, data, opts)).result as EnqueueResult<DataType, ResultType>;
  }

  /** {@link enqueue} for many jobs (deduplicated jobs go to Redis in one round trip). */
  async enqueueBulk(queue: Queue, jobs: readonly BulkJob[]): Promise<EnqueueResult[]> {
    return (await this.interceptor.enqueueBulk(queue, jobs)).map((resolution) => resolution.result);
  }

  /** Routes `add`/`addBulk` of a queue you created yourself through the library (idempotent). */
  guardQueue<Q extends Queue>(queue: Q): Q {
    return this.queueGuard.install(queue);
  }

  /**
   * The digest a job would get, or `undefined` when (queue, name) is not a unique job. A queue given by name is taken
   * under the BullMQ prefix this application uses for it, as a producer or a worker (`'bull'` when it has no queue of
   * that name); pass the `Queue` itself when one name lives under two prefixes.
   */
  digestOf(queue: Queue | string, name: string, data: unknown, opts?: JobsOptions): string | undefined {
    const queueName = typeof queue === 'string' ? queue : queue.name;
    const prefix = queuePrefixOf(queue, this.interceptor.guardedQueues(), this.workerGuard.workerQueues());
    return this.definitions.find(queueName, name)?.digestOf({ name, queueName, data, opts, prefix });
  }

  /** Rejected duplicates: list, get, retry, delete. */
  get deadSet(): DeadSetService {
    return this.interceptor.deadSet;
  }

  /**
   * Every event of the library, as an Observable: lock transitions (`locked`, `unlocked`, `duplicate`, `rescheduled`,
   * `rejected`, `replaced`, `lockLost`), the reaper's `reaped`, the idempotency events (`idempotencyClaimed`, …) and
   * `error`. See {@link UniqueJobEvent}.
   */
  get events$(): Observable<UniqueJobEvent> {
    return this.events.events$;
  }
}
