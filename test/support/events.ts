import type { LoggerService } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import type { ConflictSide, UniqueJobEvent } from '../../lib/index.js';
import type { TestApp } from './app.js';
import { deferred, type Deferred } from './deferred.js';

/**
 * Records every event of the app's `events$` (the stream completes when the app closes, or call `stop()`);
 * `next(predicate)` waits for a matching one.
 */
export class EventLog {
  readonly events: UniqueJobEvent[] = [];
  private readonly waiters: { predicate: (event: UniqueJobEvent) => boolean; done: Deferred<UniqueJobEvent> }[] = [];
  private readonly subscription: Subscription;

  constructor(app: TestApp) {
    this.subscription = app.service.events$.subscribe((event) => {
      this.events.push(event);
      for (const waiter of [...this.waiters]) {
        if (waiter.predicate(event)) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.done.resolve(event);
        }
      }
    });
  }

  of<T extends UniqueJobEvent['type']>(type: T): Extract<UniqueJobEvent, { type: T }>[] {
    return this.events.filter((event): event is Extract<UniqueJobEvent, { type: T }> => event.type === type);
  }

  /** The `duplicate` events of one side. */
  duplicates(side: ConflictSide): Extract<UniqueJobEvent, { type: 'duplicate' }>[] {
    return this.of('duplicate').filter((event) => event.side === side);
  }

  /** The first event (already seen or future) matching the predicate. */
  next(predicate: (event: UniqueJobEvent) => boolean): Promise<UniqueJobEvent> {
    const seen = this.events.find(predicate);
    if (seen) return Promise.resolve(seen);
    const done = deferred<UniqueJobEvent>();
    this.waiters.push({ predicate, done });
    return done.promise;
  }

  stop(): void {
    this.subscription.unsubscribe();
  }
}

/** A logger for `forRoot({ logger })` that keeps every line, so tests can assert on warnings. */
export function captureLogger(): { logger: LoggerService; lines: { log: string[]; warn: string[]; error: string[] } } {
  const lines = { log: [] as string[], warn: [] as string[], error: [] as string[] };
  return {
    lines,
    logger: {
      log: (message: unknown) => void lines.log.push(String(message)),
      warn: (message: unknown) => void lines.warn.push(String(message)),
      error: (message: unknown) => void lines.error.push(String(message)),
    },
  };
}
