import type { ConflictSide } from '../interfaces/unique-job-options.interface.js';

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

/** `Omit` over each member of a union. */
export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
