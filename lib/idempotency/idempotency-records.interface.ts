// The values an IdempotencyStore (idempotency-store.interface.ts) takes and answers: claims, their answers,
// completions, records.

/** What {@link IdempotencyStore.claimInTransaction} tells the work of the claim it won. */
export interface TransactionClaim {
  /** The claim replaced an `in_progress` record whose lease had ended (as {@link IdempotencyStore.claim} says). */
  takeover: boolean;
  /**
   * The claim is not committed before the work runs (it commits with it): an earlier attempt whose worker died left no
   * record, so `takeover` cannot tell of it.
   */
  uncommitted?: boolean;
  /**
   * The claim resumed a record handed over to the job between two of its steps (as {@link IdempotencyStore.claim}
   * answers `resumed`), committed before the work runs: a retried failure of the work hands it over again.
   */
  resumed?: boolean;
  /** The claim took over a crashed later step of the job (as {@link IdempotencyStore.claim} answers `laterStep`). */
  laterStep?: boolean;
}

/** The answer of {@link IdempotencyStore.claimInTransaction}: the committed `work`'s value, or the claim's loss. */
export type IdempotencyTransactionResult<T> =
  | {
      /** The claim was taken and `work` committed with it. */
      claimed: true;
      /** What `work` resolved to. */
      value: T;
    }
  | IdempotencyClaimLost;

/** The states of a record. */
export type IdempotencyState = 'in_progress' | 'completed' | 'failed';

/** Identifies a claimed record and its owner. */
export interface IdempotencyRecordRef {
  /** Scope of the key (as stored: see `normalizeIdempotencyScope`). */
  scope: string;
  /** The idempotency key (as stored: see `normalizeIdempotencyKey`). */
  key: string;
  /** The owner token the claim was taken with: random per attempt, never the job id. */
  owner: string;
}

/** A claim request. */
export interface IdempotencyClaim extends IdempotencyRecordRef {
  /** Lease of the in-progress record (ms). The holder renews it while its handler runs. */
  leaseMs: number;
  /** Fingerprint of the payload, stored with the record, or `undefined` when payloads are not compared. */
  fingerprint: string | undefined;
  /** The job that claims (for operators: who holds the key). */
  jobId: string | undefined;
  /**
   * The Redis key of the claiming BullMQ job (`<queue prefix>:<queue>:<job id>`), so the orphan reaper can tell a
   * claim whose job was removed or finished without settling it, and a store can tell a claim of the job that holds
   * a record from any other (see {@link IdempotencyStore.claim}). Stores may ignore it (then they compare fingerprints
   * whoever claims).
   */
  jobKey?: string;
  /**
   * The claiming job's creation time (BullMQ's `timestamp`, ms): with {@link jobKey}, the job itself and not a later one
   * given the same id. Stores may ignore it.
   */
  jobCreatedAt?: number;
  /**
   * The owner token this job's earlier delivery handed the key over to (see {@link IdempotencyStore.handOver}): one
   * per job (its key and creation time), the same at every delivery. A live `in_progress` record owned by it is this
   * job's own, parked between two steps: the claim takes it over (`takeover: true`, keeping the stored fingerprint)
   * instead of answering it live. Stores without `handOver` ignore it.
   */
  resumeOwner?: string;
  /**
   * The claim is followed by the handler's transaction in this store (`runInTransaction`), which completes the record
   * and commits with the database's full durability. A store may then commit the claim without waiting for it to be
   * durable (PostgreSQL: `synchronous_commit` off for the claim's own transaction): a claim lost in a database crash
   * was never completed either, since the completion's commit makes every earlier commit durable with it.
   */
  transactional?: boolean;
}

/** What {@link IdempotencyStore.handOver} makes of a record. */
export interface IdempotencyHandover {
  /** The owner token the record is handed over to (the job's {@link IdempotencyClaim.resumeOwner}). */
  owner: string;
  /** How long the record stays live while the job waits for its next delivery (ms). */
  leaseMs: number;
}

/** A claim inside the handler's transaction ({@link IdempotencyStore.claimInTransaction}). */
export interface IdempotencyTransactionalClaim extends IdempotencyClaim {
  /**
   * Retention of the completed record (ms): the claim writes the record `completed`, kept this long, and the completion
   * moves it only when the work took more than half of it.
   */
  ttlMs: number;
}

/** The answer to a claim. */
export type IdempotencyClaimResult =
  | {
      /** The key is now held by this claim's owner: the handler may run. */
      claimed: true;
      /** Whether the claim took over an in-progress record whose lease had ended (its holder died or stalled). */
      takeover: boolean;
      /**
       * The claim took over a record handed over to its job ({@link IdempotencyClaim.resumeOwner}): the job resumes
       * after a step, so a retryable failure of this attempt hands the claim over again rather than releasing it. A
       * resumed claim is no takeover to the handler (nobody died mid-run), whatever `takeover` says. Absent: not known
       * (a store without `handOver`).
       */
      resumed?: boolean;
      /**
       * The claim took over (`takeover`) the ended claim of a delivery of the same job that had resumed one: its worker
       * died mid-step, and BullMQ delivers the job again at the step its data names. A later step still, as for
       * `resumed` (a retryable failure hands the claim over), but a takeover. (A SQL store tells the job by its id.)
       */
      laterStep?: boolean;
    }
  | IdempotencyClaimLost;

/** A claim that a live record stopped. */
export interface IdempotencyClaimLost {
  /** The key is held or settled by another record: the handler must not run (see `record`). */
  claimed: false;
  /** The live record that stopped the claim. */
  record: IdempotencyRecord;
  /** How long until that record stops being live, by the store's clock (ms). */
  expiresInMs: number;
  /**
   * Whether the holder still holds the key, for a record the store cannot read back yet (a claim inside a transaction
   * that has not committed: `record.owner` is then `undefined`). Absent: {@link IdempotencyStore.get} tells.
   */
  stillHeld?: () => Promise<boolean>;
  /**
   * The live record is the claiming job's own (its key and creation time match: see {@link IdempotencyStore.claim}):
   * its data may have changed since it claimed, and it is replayed or waited for whatever its fingerprint. `false`: the
   * store can tell, and it is not. Absent (a store that cannot tell): a live `in_progress` record naming the claiming
   * job's id is waited for whatever its fingerprint (it may be this job's, between a step's move and its handover).
   */
  ownJob?: boolean;
}

/** What `complete` stores. */
export interface IdempotencyCompletion {
  /** The handler's return value as JSON text; `undefined` when it returned `undefined`. */
  result: string | undefined;
  /** Retention of the completed record (ms). */
  ttlMs: number;
  /**
   * Transactional mode, a step of a step job (see {@link IdempotencyStore.handOver}): instead of completing the record,
   * hand it over in the same transaction, so the step's writes commit with a record its job's next delivery resumes
   * (`result` is then `undefined`). Given only to a store that declares
   * {@link IdempotencyStore.handsOverInTransaction}.
   */
  handover?: IdempotencyHandover;
}

/** What `fail` stores. */
export interface IdempotencyFailure {
  /** The error, as `{ name, message }` JSON text. */
  error: string;
  /** Retention of the failed record (ms). */
  ttlMs: number;
}

/** A record as a store reads it back. */
export interface IdempotencyRecord {
  /** Scope of the key, as stored. */
  scope: string;
  /** The idempotency key, as stored. */
  key: string;
  /**
   * `in_progress` while a claim holds it (until its lease ends), `completed` with a stored result, `failed` with a kept
   * failure (`onFailure: 'keep'`).
   */
  state: IdempotencyState;
  /** Owner token of the claim that wrote it. */
  owner: string | undefined;
  /**
   * The job that claimed it, stored exactly as claimed ({@link IdempotencyClaim.jobId}): a delivery that meets the
   * record in progress compares it with its own job's id when the store gives no `ownJob` answer (see
   * {@link IdempotencyClaimLost}), and waits rather than failing as a mismatch when they are equal.
   */
  jobId: string | undefined;
  /** Fingerprint of the payload that claimed it; `undefined` when payloads are not compared. */
  fingerprint: string | undefined;
  /** Stored return value (JSON text) of a completed record. */
  result: string | undefined;
  /** Stored error (`{ name, message }` JSON text) of a failed record. */
  error: string | undefined;
  /** Times the key was claimed since it was last absent (2 and more: takeovers). */
  attempts: number;
  /** When the record was first claimed (ms since epoch). */
  createdAt: number;
  /** When the lease or the retention ends (ms since epoch, store clock). */
  expiresAt: number;
}
