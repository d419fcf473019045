import type { LoggerService, OnModuleInit } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { Subject, type Observable, type Subscription } from 'rxjs';
import { loggerOf, type LoggerLike } from '../common/logger.js';
import { findEventEmitter, forwardToEventEmitter } from './event-emitter.forwarder.js';
import { logEvents, logsEventType, validateLogLevels, type UniqueJobsLogLevels } from './event-logger.js';
import { SafeObservable } from './safe-observable.js';
import type { DistributiveOmit, UniqueJobEvent } from './unique-job-event.interface.js';
import { asError } from '../errors/thrown.js';

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
