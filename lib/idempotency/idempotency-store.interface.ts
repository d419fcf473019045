import type { Redis } from 'ioredis';

/**
 * The contract every idempotency store meets: Redis (default), PostgreSQL, SQLite, or your own. One shared contract
 * test suite (`test/idempotency/store-contract.ts`) runs against each store; run it against a custom store too.
 *
 * A record is identified by `(scope, key)`. It is *live* while its `expiresAt` is in the future by the store's own
 * clock: for an `in_progress` record that is the end of its lease, for a `completed` or `failed` record the end of its
 * retention. A record that is not live is treated exactly as an absent one.
 *
 * Every state change is atomic in the store and, except `claim`, a compare-and-set on the owner token: a holder whose
 * lease was taken over can never complete, fail, renew or release the record of the new holder.
 */
export interface IdempotencyStore<Transaction = unknown> {
  /** A short name for messages and events, e.g. `'redis'`, `'postgres'`, `'sqlite'`. */
  readonly name: string;

  /**
   * Claims a key atomically: when no live record exists, writes an `in_progress` record owned by `request.owner` with a
   * lease of `request.leaseMs` and answers `{ claimed: true }` (`takeover: true` when it replaced an `in_progress`
   * record whose lease had ended: its holder crashed or stalled). Otherwise changes nothing and answers the live record.
   * Exactly one of any number of concurrent claimants wins. An `in_progress` record whose lease ended is NOT taken over
   * by a claim with a different fingerprint (both present) for ten minutes after its lease ended: that claim answers the
   * record (with `expiresInMs` 0) so the caller reports a mismatch instead of running another payload. Except by the
   * job the record names, whose fingerprint is not compared (its handler may have changed its data with
   * `job.updateData` before its worker died; a redelivery of the same job is no mismatch) and whose takeover keeps the
   * stored fingerprint: a store that keeps the claiming job's key and creation time (`request.jobKey`,
   * `request.jobCreatedAt`) applies this when both equal the request's, all known, and answers a live record of that
   * job with `ownJob: true`. A job id alone cannot tell two queues' jobs apart (both have a job "5"), nor a key alone a
   * job from a later one given the same id: a store that keeps no such identity (the SQL stores) compares fingerprints
   * whoever claims, as stores written before this rule do.
   */
  claim(request: IdempotencyClaim): Promise<IdempotencyClaimResult>;

  /**
   * Extends the lease of the owner's `in_progress` record to `leaseMs` from now. A late renewal still succeeds while
   * nobody took the record over. `false`: the owner lost it (taken over, released, settled, or expired away).
   */
  renew(ref: IdempotencyRecordRef, leaseMs: number): Promise<boolean>;

  /**
   * Turns the owner's `in_progress` record into `completed`, storing `completion.result` (JSON text, or `undefined` for
   * a handler that returned nothing) and keeping it `completion.ttlMs`. The fingerprint stays. `false`: the owner lost
   * its claim and nothing was written.
   */
  complete(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): Promise<boolean>;

  /**
   * Optional, for stores on Redis: {@link complete}, sent on `connection` — the connection the worker records the
   * job's outcome on — when this store's records live on that connection's server (answer `undefined` otherwise, and
   * the runner awaits {@link complete}). Sent there, the completion takes effect before BullMQ records the job as
   * completed, because one connection keeps one order; so the runner does not wait for the answer before returning,
   * and the completion costs no round trip of its own. It must be sent before this method returns.
   */
  completeInOrder?(
    connection: Redis,
    ref: IdempotencyRecordRef,
    completion: IdempotencyCompletion,
  ): Promise<boolean> | undefined;

  /**
   * Hands the owner's `in_progress` record over to the claiming job's next delivery (optional): a step of a step job
   * moved its job (`moveToDelayed` + `DelayedError`, `moveToWaitingChildren` + `WaitingChildrenError`, `moveToWait` +
   * `WaitingError`), so its handler ends without settling the key and the same job runs again later. Makes the record's
   * owner `handover.owner` and its lease `handover.leaseMs` from now, in one compare-and-set on `ref.owner`; `false`:
   * the owner lost it. A store that implements it must then let a claim whose `resumeOwner` equals the record's owner
   * take the live record over (see {@link IdempotencyClaim.resumeOwner}), while every other claim still meets it live.
   * Absent: the runner releases the claim, and a duplicate delivered while the job waits runs from its first step.
   */
  handOver?(ref: IdempotencyRecordRef, handover: IdempotencyHandover): Promise<boolean>;

  /**
   * Whether {@link runInTransaction} and {@link claimInTransaction} honour {@link IdempotencyCompletion.handover}
   * (optional): a step of a step job in transactional mode then commits its writes with the record handed over to the
   * job's next delivery. Absent or `false`: such a step rolls back, its claim released.
   */
  readonly handsOverInTransaction?: boolean;

  /** Turns the owner's `in_progress` record into `failed`, storing `failure.error`, kept `failure.ttlMs`. */
  fail(ref: IdempotencyRecordRef, failure: IdempotencyFailure): Promise<boolean>;

  /** Deletes the owner's `in_progress` record, so the next delivery claims it. `false`: not the owner any more. */
  release(ref: IdempotencyRecordRef): Promise<boolean>;

  /** The live record of a key, if any. */
  get(scope: string, key: string): Promise<IdempotencyRecord | undefined>;

  /**
   * Deletes a key's record whatever its state (operations and tests). `true` when a record was deleted (a store may
   * count one that is no longer live but not purged yet).
   */
  delete(scope: string, key: string): Promise<boolean>;

  /**
   * Deletes up to `limit` records that no longer matter (optional; the orphan reaper calls it): settled records past
   * their retention, and `in_progress` records whose lease ended more than ten minutes ago (until then an ended claim
   * still answers a different payload as a mismatch). Resolves how many rows were deleted. Stores whose records expire
   * by themselves (Redis) need not implement it.
   */
  prune?(limit: number): Promise<number>;

  /**
   * Checks that the store can work: a SQL store reads its table (optional). The module calls it at bootstrap, before
   * any worker takes a job, and fails the bootstrap with `IdempotencyStoreNotReadyError` naming the store as
   * registered. Throws an Error saying what is missing and how to create it (e.g. the table and its migration).
   */
  verify?(): Promise<void>;

  /**
   * Transactional mode, for stores that have transactions (PostgreSQL, SQLite): opens a transaction, first makes sure
   * the owner still holds the record and locks it for the transaction (no claimant can take it over until the
   * transaction ends, so the caller stops renewing the lease before calling this), runs `work` with a
   * transaction-bound client, then in the same transaction completes the owner's record with `completion(value)` and
   * commits. The handler's writes and the completed record commit together or not at all. If the owner lost its claim,
   * or `work` or `completion` throws, the transaction rolls back and the error is thrown
   * ({@link IdempotencyLeaseLostError} for a lost claim).
   */
  runInTransaction?<T>(
    ref: IdempotencyRecordRef,
    work: (transaction: Transaction) => Promise<T>,
    completion: (value: T) => IdempotencyCompletion,
  ): Promise<T>;

  /**
   * Transactional mode with the claim inside the handler's transaction (optional; the runner prefers it to
   * {@link claim} followed by {@link runInTransaction}): opens a transaction, claims `request` in it, and when the claim
   * wins runs `work` with the transaction-bound client and `{ takeover }`, stores `completion(value)` in the same
   * transaction and commits. The record is written `completed` by the claim itself, so it is seen by others only once
   * the handler's writes commit with it; until then a claimant of the same key answers an `in_progress` record whose
   * holder it cannot name, with a `stillHeld` probe. A claim that loses answers the live record, as {@link claim}
   * does, and runs nothing.
   *
   * When the transaction rolls back after the claim won (`work` or `completion` threw, the connection dropped), the
   * claim rolls back with it: nothing of the attempt remains. The error is thrown; then {@link release} answers `true`
   * for the owner, and {@link fail} writes the `failed` record if no other claim holds the key meanwhile.
   */
  claimInTransaction?<T>(
    request: IdempotencyTransactionalClaim,
    work: (transaction: Transaction, claim: TransactionClaim) => Promise<T>,
    completion: (value: T) => IdempotencyCompletion,
  ): Promise<IdempotencyTransactionResult<T>>;
}

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
  /** The job that claimed it. */
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
