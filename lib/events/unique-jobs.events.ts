import { Injectable } from '@nestjs/common';
import { Observable, Subject } from 'rxjs';
import type { ConflictSide } from '../interfaces/conflict-strategy.interface.js';

interface EventBase {
  queue: string;
  jobName: string;
  digest: string;
  /** Time of the event (ms since epoch). */
  at: number;
}

/** Every lock transition the library makes, as a discriminated union on `type`. */
export type UniqueJobEvent =
  | (EventBase & { type: 'locked'; jobId: string; lock: 'enqueue' | 'runtime' })
  | (EventBase & { type: 'unlocked'; jobId: string; lock: 'enqueue' | 'runtime' })
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
  | (EventBase & { type: 'error'; jobId?: string; error: Error });

/**
 * The stream of lock events. An event is published after the lock operation it reports, so a subscriber cannot change
 * a job's outcome; but rxjs reports an error thrown by a subscriber as unhandled (by default a process-level
 * exception), so catch errors inside your subscriber.
 */
@Injectable()
export class UniqueJobsEvents {
  private readonly subject = new Subject<UniqueJobEvent>();

  /** Every event, as an Observable. */
  get events$(): Observable<UniqueJobEvent> {
    return this.subject.asObservable();
  }

  /** Publishes an event (used by the library and by custom strategies). */
  emit(event: DistributiveOmit<UniqueJobEvent, 'at'>): void {
    if (!this.subject.observed) return;
    try {
      this.subject.next({ ...event, at: Date.now() });
    } catch {
      // A throwing subscriber must never break the job that emitted the event.
    }
  }

  /** Completes the stream (module shutdown). */
  complete(): void {
    this.subject.complete();
  }
}

/** `Omit` over each member of a union. */
export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
