import type { LoggerService, OnModuleInit } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { Subject, type Observable, type Subscription } from 'rxjs';
import { loggerOf, type LoggerLike } from '../common/logger.js';
import type { ConflictSide } from '../interfaces/unique-job-options.interface.js';
import { findEventEmitter, forwardToEventEmitter } from './event-emitter.forwarder.js';
import { logEvents, logsEventType, validateLogLevels, type UniqueJobsLogLevels } from './event-logger.js';
import { SafeObservable } from './safe-observable.js';
import { asError } from '../errors/thrown.js';

interface JobEventBase {
  /** Name of the job's queue. */
  queue: string;
  /** Name of the job (BullMQ's `job.name`). */
  jobName: string;
  /** Time of the event (ms since epoch). */
  at: number;
}

interface EventBase extends JobEventBase {
  /** The job's digest: what its locks are keyed by (`v1:` + 64 hex digits). */
  digest: string;
}

interface IdempotencyEventBase extends JobEventBase {
  /** Id of the job whose attempt made the transition. */
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
  | (IdempotencyEventBase & {
      /**
       * What happened: the attempt `idempotencyClaimed` the key (it runs the handler), `idempotencyCompleted` it (the
       * result is stored), `idempotencyReplayed` a stored result without running, met it `idempotencyInProgress` in
       * another job, `idempotencyReleased` its claim after a failure that is retried, kept the failure for good
       * (`idempotencyFailureKept`, `onFailure: 'keep'`), met a record of another payload (`idempotencyMismatch`), lost
       * its claim while the handler ran (`idempotencyLeaseLost`), or found no key (`idempotencyMissingKey`).
       */
      type: 'idempotencyClaimed';
      /** Whether the claim took over a record whose previous claim had ended (its lease ran out: a dead holder). */
      takeover: boolean;
    })
  | (IdempotencyEventBase & { type: 'idempotencyCompleted' })
  | (IdempotencyEventBase & {
      type: 'idempotencyReplayed';
      /**
       * The stored outcome replayed: `completed` returns the stored result, `failed` (`onFailure: 'keep'`) fails the job
       * with `IdempotencyKeyFailedError`.
       */
      state: 'completed' | 'failed';
    })
  | (IdempotencyEventBase & {
      type: 'idempotencyInProgress';
      /**
       * What the job did (its `onInProgress`): `delayed` went back to BullMQ's delayed set without using an attempt,
       * `failed` failed the attempt with `IdempotencyInProgressError`.
       */
      action: 'delayed' | 'failed';
      /** Id of the job holding the claim; `undefined` when the store cannot name it. */
      holderJobId: string | undefined;
      /**
       * Milliseconds until the holder's claim could end (its lease): `delayed` waits that long at most (the holder
       * promotes the job as soon as it settles the key), plus a small margin.
       */
      retryInMs: number;
    })
  | (IdempotencyEventBase & { type: 'idempotencyReleased' })
  | (IdempotencyEventBase & {
      /**
       * The handler moved its own job and ended between two steps (BullMQ's step jobs), or a later step of such a job
       * failed and BullMQ retries it: the claim is kept for the job's next delivery, which resumes it; other deliveries
       * of the key wait.
       */
      type: 'idempotencyHandedOver';
      /**
       * The name of the error the handler ended with: `DelayedError`, `WaitingChildrenError` or `WaitingError` for a
       * step; for a later step's failure that is retried, that failure's.
       */
      step: string;
      /** How long the record stays live for the job's next delivery, ms. */
      leaseMs: number;
    })
  | (IdempotencyEventBase & { type: 'idempotencyFailureKept' })
  | (IdempotencyEventBase & { type: 'idempotencyMismatch' })
  | (IdempotencyEventBase & { type: 'idempotencyLeaseLost' })
  | (JobEventBase & {
      type: 'idempotencyMissingKey';
      /** Id of the job whose key function returned no key. */
      jobId: string;
      /** What the job did (its `onMissingKey`): `failed` for good, or `ran` without idempotency. */
      action: 'failed' | 'ran';
      /** What the key function returned, described (`undefined`, `an empty string`, `an error (…)`, …). */
      got: string;
    });

/** Every lock and idempotency transition the library makes, as a discriminated union on `type`. */
export type UniqueJobEvent =
  | IdempotencyEvent
  | (EventBase & {
      /**
       * What happened: a job's lock was `locked` or `unlocked`; a `duplicate` met a held lock (handled by its
       * strategy), and with the `reschedule`, `reject` or `replace` strategy was `rescheduled`, `rejected` (into the
       * dead set) or `replaced` the holder; a run-time lock was lost while its handler ran (`lockLost`); the orphan
       * reaper `reaped` a leftover; bookkeeping failed (`error`). The idempotency transitions are {@link IdempotencyEvent}.
       */
      type: 'locked';
      /** Id of the job that took the lock (for a `duplicate`, of the duplicate met at run time: server side only). */
      jobId: string;
      /** Which lock: the one taken at enqueue, or the one held while the handler runs. */
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
      /** Where the duplicate was met: `client` at enqueue, `server` when a worker started it. */
      side: ConflictSide;
      /** The strategy that handled it (a built-in name, a custom one, or `superseded` for a retry left to a newer job). */
      strategy: string;
      jobId?: string;
      /** Id of the job holding the lock; `undefined` when the lock does not name it. */
      existingJobId: string | undefined;
    })
  | (EventBase & {
      type: 'rescheduled';
      jobId: string;
      /** How long the job was delayed (ms: the definition's `rescheduleIn`). */
      delay: number;
      /** How many times the job has been rescheduled, this one included (up to `maxReschedules`). */
      reschedules: number;
    })
  | (EventBase & {
      type: 'rejected';
      side: ConflictSide;
      /** Id of the dead-set entry that keeps the duplicate (to retry or delete it). */
      deadSetEntryId: string;
      existingJobId: string | undefined;
    })
  | (EventBase & {
      type: 'replaced';
      jobId: string;
      /** Id of the holder this job removed to take its place. */
      replacedJobId: string;
    })
  | (EventBase & { type: 'lockLost'; jobId: string })
  | {
      /**
       * The orphan reaper released a lock, a deduplication key, an ended lease or an idempotency claim; or a job of a
       * digest released the run-time lock slot parked for a job that will not come back for it (finished or gone).
       */
      type: 'reaped';
      /** Time of the event (ms since epoch). */
      at: number;
      /** The Redis key released. */
      key: string;
      /** What the key was. */
      kind: 'enqueueLock' | 'deduplicationKey' | 'runtimeLease' | 'idempotencyClaim';
      /** Id of the job that held it, when the key names one. */
      jobId?: string;
      /** Why it was an orphan, as in {@link ReapedItem.reason}: `'lease ended'`, `'job gone'`, `'job finished'`… */
      reason: string;
    }
  | (JobEventBase & {
      type: 'error';
      /** The digest of the job, when the failure concerns its locks. */
      digest?: string;
      /** Scope of the idempotency key, when the failure concerns one. */
      scope?: string;
      /** The idempotency key, when the failure concerns one. */
      key?: string;
      /** Id of the job, when known. */
      jobId?: string;
      /** What failed: the library's bookkeeping (a release, a store write…), not the job's handler. */
      error: Error;
    });

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
  /** Subscribers of {@link events$} (EventEmitter2, metrics, tracing, the application's): not the event log lines. */
  private listeners = 0;
  /** Whether the event log lines are subscribed. */
  private logging = false;

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
      (subscriber) => {
        this.listeners++;
        const subscription = this.subject.subscribe(subscriber);
        return () => {
          this.listeners--;
          subscription.unsubscribe();
        };
      },
    );
  }

  /** Every event (locks and idempotency), as an Observable. A subscriber that throws is logged and kept subscribed. */
  get events$(): Observable<UniqueJobEvent> {
    return this.stream;
  }

  /** Starts the event log lines and the forwarding to EventEmitter2 (when the application has one). */
  async onModuleInit(): Promise<void> {
    if (this.options?.logger !== false) {
      // On a stream of their own, guarded as `events$` is, not counted among its listeners.
      const lines = new SafeObservable<UniqueJobEvent>(
        (error) => this.reportListenerError(error),
        (subscriber) => this.subject.subscribe(subscriber),
      );
      const logging = logEvents(lines, this.logger, this.options?.logLevels);
      if (logging) {
        this.subscriptions.push(logging);
        this.logging = true;
      }
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

  /**
   * Whether an event of this type would reach anyone: a subscriber (of {@link events$}, EventEmitter2), or a log line
   * its level and the logger's levels let through (`locked` is logged at `debug`: not when the application's logger
   * leaves `debug` out). When not, the event need not be built.
   */
  observes(type: UniqueJobEvent['type']): boolean {
    if (this.listeners > 0) return true;
    return this.logging && logsEventType(this.logger, this.options?.logLevels ?? {}, type);
  }

  /** Publishes an event (used by the library and by custom strategies). */
  emit(event: DistributiveOmit<UniqueJobEvent, 'at'>): void {
    if (!this.observes(event.type)) return;
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
