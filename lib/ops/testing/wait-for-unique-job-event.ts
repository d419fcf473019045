import { filter, firstValueFrom, take, timeout, type Observable } from 'rxjs';
import type { UniqueJobEvent } from '../../events/unique-job-event.interface.js';
import { UniqueJobsEvents } from '../../events/unique-jobs.events.js';
import type { UniqueJobsTestTarget } from './testing-target.js';

/** Where events come from: the application, `UniqueJobsService` or `UniqueJobsEvents` (anything with `events$`). */
export type UniqueJobsEventSource =
  | UniqueJobsTestTarget
  | {
      /** The library's events, as `UniqueJobsService.events$` publishes them. */
      readonly events$: Observable<UniqueJobEvent>;
    };

/**
 * Resolves the next event of `type` (matching `predicate`, when given); rejects after `timeoutMs` (default 10 s).
 * It listens from the moment it is called, so call it before the action that publishes the event, and await it after:
 *
 * ```ts
 * const unlocked = waitForUniqueJobEvent(app, 'unlocked', (event) => event.jobId === job.id);
 * await job.waitUntilFinished(queueEvents);
 * await unlocked;
 * ```
 */
export function waitForUniqueJobEvent<T extends UniqueJobEvent['type']>(
  source: UniqueJobsEventSource,
  type: T,
  predicate?: (event: Extract<UniqueJobEvent, { type: T }>) => boolean,
  timeoutMs = 10_000,
): Promise<Extract<UniqueJobEvent, { type: T }>> {
  const events$ = 'events$' in source ? source.events$ : source.get(UniqueJobsEvents, { strict: false }).events$;
  return firstValueFrom(
    events$.pipe(
      filter((event): event is Extract<UniqueJobEvent, { type: T }> => event.type === type),
      filter((event) => predicate?.(event) ?? true),
      take(1),
      timeout({
        first: timeoutMs,
        with: () => {
          throw new Error(
            `No "${type}" unique-jobs event${predicate ? ' matching the predicate' : ''} within ${timeoutMs} ms`,
          );
        },
      }),
    ),
  );
}
