import type { ModuleRef } from '@nestjs/core';
import type { Observable, Subscription } from 'rxjs';
import { runGuarded, type ListenerErrorReporter } from './safe-observable.js';
import type { UniqueJobEvent } from './unique-job-event.interface.js';

/**
 * Prefix of the `@nestjs/event-emitter` event names the library's events are forwarded under: the `locked` event is
 * `unique-jobs.locked`, `idempotencyReplayed` is `unique-jobs.idempotencyReplayed`, and so on.
 */
export const UNIQUE_JOBS_EVENT_PREFIX = 'unique-jobs.';

type Listener = (this: unknown, ...args: unknown[]) => unknown;

/** What the forwarder uses of an EventEmitter2. */
interface EventEmitter2Like {
  listeners(event: string): Listener[];
  listenersAny(): Listener[];
}

/**
 * The application's `EventEmitter2` when `@nestjs/event-emitter` is installed and `EventEmitterModule` is imported
 * (found anywhere in the application), else `undefined`.
 */
export async function findEventEmitter(moduleRef: ModuleRef | undefined): Promise<EventEmitter2Like | undefined> {
  if (!moduleRef) return undefined;
  let token: unknown;
  try {
    ({ EventEmitter2: token } = await import('@nestjs/event-emitter'));
  } catch {
    return undefined; // the optional peer is not installed
  }
  try {
    return moduleRef.get<unknown, EventEmitter2Like>(token as never, { strict: false });
  } catch {
    return undefined; // installed, but EventEmitterModule is not imported
  }
}

/**
 * Forwards every event to an EventEmitter2 as `unique-jobs.<type>` (wildcards and `onAny` listeners included). Each
 * listener is called on its own, so one that throws, or returns a promise that rejects, is reported and neither stops
 * the others nor reaches the job. (A listener registered with EventEmitter2's own `{ async: true }` runs later, outside
 * this call: `@OnEvent` catches its errors unless `suppressErrors: false`.)
 */
export function forwardToEventEmitter(
  events$: Observable<UniqueJobEvent>,
  emitter: EventEmitter2Like,
  report: ListenerErrorReporter,
): Subscription {
  return events$.subscribe((event) => {
    const name = `${UNIQUE_JOBS_EVENT_PREFIX}${event.type}`;
    const context = emitter as EventEmitter2Like & { event?: string };
    for (const listener of [...emitter.listenersAny()]) {
      context.event = name;
      runGuarded(() => listener.call(emitter, name, event), report);
    }
    for (const listener of [...emitter.listeners(name)]) {
      context.event = name; // as EventEmitter2#emit sets it, for listeners that read `this.event`
      runGuarded(() => listener.call(emitter, event), report);
    }
  });
}
