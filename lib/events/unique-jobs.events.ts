import { Injectable } from '@nestjs/common';
import { Observable, Subject } from 'rxjs';
import type { ConflictSide } from '../interfaces/conflict-strategy.interface.js';

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
  | (JobEventBase & { type: 'error'; digest?: string; scope?: string; key?: string; jobId?: string; error: Error });

/**
 * The stream of lock and idempotency events. An event is published after the lock operation it reports, so a subscriber cannot change
 * a job's outcome; but rxjs reports an error thrown by a subscriber as unhandled (by default a process-level
 * exception), so catch errors inside your subscriber.
 */
@Injectable()
export class UniqueJobsEvents {
  private readonly subject = new Subject<UniqueJobEvent>();

  /** Every event (locks and idempotency), as an Observable. */
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
