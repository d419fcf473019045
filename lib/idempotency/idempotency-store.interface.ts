import type { Redis } from 'ioredis';
import type {
  TransactionClaim,
  IdempotencyTransactionResult,
  IdempotencyRecordRef,
  IdempotencyClaim,
  IdempotencyHandover,
  IdempotencyTransactionalClaim,
  IdempotencyClaimResult,
  IdempotencyCompletion,
  IdempotencyFailure,
  IdempotencyRecord,
} from './idempotency-records.interface.js';

export type {
  TransactionClaim,
  IdempotencyTransactionResult,
  IdempotencyState,
  IdempotencyRecordRef,
  IdempotencyClaim,
  IdempotencyHandover,
  IdempotencyTransactionalClaim,
  IdempotencyClaimResult,
  IdempotencyClaimLost,
  IdempotencyCompletion,
  IdempotencyFailure,
  IdempotencyRecord,
} from './idempotency-records.interface.js';

/**
 * The contract every idempotency store meets: Redis (default), PostgreSQL, SQLite, or your own. One shared contract
 * test suite (`describeIdempotencyStoreContract` of `nestjs-unique-jobs/store-contract`) runs against each store; run
 * it against a custom store too.
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
   * count one that is no longer live but not purged yet). A live claim is deleted too: never delete an `in_progress`
   * record whose handler may still run (its lease not ended, or a step job parked between steps), or the next delivery
   * of the key runs beside it, or from its first step.
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
