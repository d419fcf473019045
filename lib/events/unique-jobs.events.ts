import type { LoggerService, OnModuleInit } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { Subject, type Observable, type Subscription } from 'rxjs';
import { loggerOf, type LoggerLike } from '../common/logger.js';
import type { ConflictSide } from '../interfaces/unique-job-options.interface.js';
import { findEventEmitter, forwardToEventEmitter } from './event-emitter.forwarder.js';
import { logEvents, validateLogLevels, type UniqueJobsLogLevels } from './event-logger.js';
import { SafeObservable } from './safe-observable.js';
import { asError } from '../errors/thrown.js';

interface JobEventBase {
  queue: string;
  jobName: string;
  /** Time of the event (ms since epoch). */
  at: number;
}

interface EventBase extends JobEventBase {
  digest: string;
}

interface IdempotencyEventBase extends JobEventBase {
  jobId: string;
  /** Scope of the idempotency key. */
  scope: string;
  /** The idempotency key (as stored). */
  key: string;
  /** Name of the store. */
  store: string;
}

/** Every idempotency transition, as a discriminated union on `type`. */
export type IdempotencyEvent =
  | (IdempotencyEventBase & { type: 'idempotencyClaimed'; takeover: boolean })
  | (IdempotencyEventBase & { type: 'idempotencyCompleted' })
  | (IdempotencyEventBase & { type: 'idempotencyReplayed'; state: 'completed' | 'failed' })
  | (IdempotencyEventBase & {
      type: 'idempotencyInProgress';
      action: 'delayed' | 'failed';
      holderJobId: string | undefined;
      retryInMs: number;
    })
  | (IdempotencyEventBase & { type: 'idempotencyReleased' })
  | (IdempotencyEventBase & { type: 'idempotencyFailureKept' })
  | (IdempotencyEventBase & { type: 'idempotencyMismatch' })
  | (IdempotencyEventBase & { type: 'idempotencyLeaseLost' })
  | (JobEventBase & { type: 'idempotencyMissingKey'; jobId: string; action: 'failed' | 'ran' });

/** Every lock and idempotency transition the library makes, as a discriminated union on `type`. */
export type UniqueJobEvent =
  | IdempotencyEvent
  | (EventBase & {
      type: 'locked';
      jobId: string;
      lock: 'enqueue' | 'runtime';
      /** Run-time lock: how long the worker waited for it (ms; up to `lockTimeout`). */
      waitedMs?: number;
    })
  | (EventBase & {
      type: 'unlocked';
      jobId: string;
      lock: 'enqueue' | 'runtime';
      /**
       * How long the lock was held (ms): a run-time lock from when the worker took it, an enqueue lock from when the
       * job was created (the producer's clock).
       */
      heldMs?: number;
    })
  | (EventBase & {
      type: 'duplicate';
      side: ConflictSide;
      strategy: string;
      jobId?: string;
      existingJobId: string | undefined;
    })
  | (EventBase & { type: 'rescheduled'; jobId: string; delay: number; reschedules: number })
  | (EventBase & { type: 'rejected'; side: ConflictSide; deadSetEntryId: string; existingJobId: string | undefined })
  | (EventBase & { type: 'replaced'; jobId: string; replacedJobId: string })
  | (EventBase & { type: 'lockLost'; jobId: string })
  | {
      /** The orphan reaper released a lock, a deduplication key, an ended lease or an idempotency claim. */
      type: 'reaped';
      at: number;
      key: string;
      kind: 'enqueueLock' | 'deduplicationKey' | 'runtimeLease' | 'idempotencyClaim';
      jobId?: string;
      reason: string;
    }
  | (JobEventBase & { type: 'error'; digest?: string; scope?: string; key?: string; jobId?: string; error: Error });

/**
 * The stream of lock and idempotency events, as an Observable ({@link events$}) and, when `@nestjs/event-emitter`'s
 * `EventEmitterModule` is imported, as EventEmitter2 events named `unique-jobs.<type>`; each event is also logged at
 * its level (`forRoot({ logLevels })`). An event is published after the operation it reports, and a listener cannot
 * break anything: what an Observable subscriber or an EventEmitter2 listener throws (or an async one rejects with) is
 * logged as an error and goes no further; the job and the other listeners carry on.
 */
export class UniqueJobsEvents implements OnModuleInit {
  private readonly subject = new Subject<UniqueJobEvent>();
  private readonly stream: Observable<UniqueJobEvent>;
  private readonly logger: LoggerLike;
  private readonly subscriptions: Subscription[] = [];

  /**
   * `options`: the module's logger and log levels (the module builds the instance it provides). `moduleRef`: where to
   * look for `@nestjs/event-emitter`'s emitter.
   */
  constructor(
    private readonly options?: { logger?: LoggerService | false; logLevels?: UniqueJobsLogLevels },
    private readonly moduleRef?: ModuleRef,
  ) {
    validateLogLevels(options?.logLevels);
    this.logger = loggerOf(options?.logger);
    this.stream = new SafeObservable<UniqueJobEvent>(
      (error) => this.reportListenerError(error),
      (subscriber) => this.subject.subscribe(subscriber),
    );
  }

  /** Every event (locks and idempotency), as an Observable. A subscriber that throws is logged and kept subscribed. */
  get events$(): Observable<UniqueJobEvent> {
    return this.stream;
  }

  /** Starts the event log lines and the forwarding to EventEmitter2 (when the application has one). */
  async onModuleInit(): Promise<void> {
    if (this.options?.logger !== false) {
      const logging = logEvents(this.events$, this.logger, this.options?.logLevels);
      if (logging) this.subscriptions.push(logging);
    }
    const emitter = await findEventEmitter(this.moduleRef);
    if (emitter) {
      this.subscriptions.push(forwardToEventEmitter(this.events$, emitter, (error) => this.reportListenerError(error)));
    }
  }

  /** Whether anything listens to the events: when nothing does, an event need not even be built. */
  get observed(): boolean {
    return this.subject.observed;
  }

  /** Publishes an event (used by the library and by custom strategies). */
  emit(event: DistributiveOmit<UniqueJobEvent, 'at'>): void {
    if (!this.subject.observed) return;
    try {
      this.subject.next({ ...event, at: Date.now() });
    } catch (error) {
      // Subscribers are guarded; this is a last resort: publishing an event never breaks the job that emitted it.
      this.reportListenerError(error);
    }
  }

  /** Completes the stream and stops the log lines and the forwarding (module shutdown, after the workers closed). */
  complete(): void {
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    this.subject.complete();
  }

  private reportListenerError(error: unknown): void {
    try {
      const text = error instanceof Error ? (error.stack ?? error.message) : asError(error).message;
      this.logger.error(`A listener of the unique-jobs events threw (the job is not affected): ${text}`);
    } catch {
      // A logger that throws: nothing more can be done.
    }
  }
}

/** `Omit` over each member of a union. */
export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
