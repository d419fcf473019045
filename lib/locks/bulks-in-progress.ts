import { randomBytes } from 'node:crypto';
import type { UniqueJobsKeys } from '../redis/keys.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { LockStore } from './lock-store.js';

/**
 * The fewest entries that make an `addBulk` with any entry whose lock is taken before its add (slot-set locks) announce
 * itself ({@link BulksInProgress}). Every entry counts, not only those: such a lock waits for BullMQ's add of the whole
 * bulk. A smaller bulk is readied and added in well under a second (about 0.1 s per 1,000 entries on a 2-core
 * machine), far within the reaper's grace and the 15 s a slot is given before its holder counts as stale.
 */
export const ANNOUNCED_BULK_ENTRIES = 1000;

/** How long an announcement lives unless renewed (every third of it while its bulk runs), at the least. */
const ANNOUNCEMENT_LEASE_MS = 60_000;
/**
 * How much longer an announcement lives per entry of its bulk: a bulk blocks its producer's event loop (no renewal
 * goes out meanwhile) for up to ~60 µs per entry on a 2-core machine (its locks sent, then BullMQ's pipeline built: 11.7
 * s for 200,000). A lease outlives a block of two thirds of it; 250 µs per entry leaves room for a machine four times
 * slower (a million entries: 250 s).
 */
const ANNOUNCEMENT_LEASE_PER_ENTRY_MS = 0.25;
/**
 * Allowance when a bulk's age is set against a slot's (each read on its own server's clock, at different moments; a
 * slot's age is read from its lease left, by the shortest lease the bulk announced).
 */
const AGE_ALLOWANCE_MS = 1000;
/** Announcements held at once (the set is bounded): a bulk beyond them goes unannounced. */
const MAX_ANNOUNCED = 1000;

/**
 * The `addBulk` calls in progress that hold slot-set locks for jobs not added yet. A bulk takes every such lock before
 * BullMQ's one add of the whole bulk: a lock waits for its job about 1.2 s per 10,000 entries here, longer than the
 * reaper's grace (15 s by default) or the 15 s after which a holder whose job is missing counts as stale, for a bulk of
 * ~120,000. A bulk of {@link ANNOUNCED_BULK_ENTRIES} or more entries, any of them such, announces itself while it runs,
 * and neither the reaper nor a producer meeting the lock takes such a holder for an orphan meanwhile.
 *
 * An announcement is a leased token in one sorted set under the library's prefix (like a run-time lock: at most
 * {@link MAX_ANNOUNCED}, renewed while the bulk runs): a producer that dies mid-bulk leaves its token for at most 60 s.
 * It says nothing of which locks are the bulk's (a general-path lock records only its owner's job id), only when its
 * bulk began and the shortest lease it locks with (`<server ms>:L<lease>:<id>`): the reaper keeps back every
 * general-path suspect while a bulk spans its grace, and a producer keeps a holder whose job is missing while a bulk
 * that began before its slot was taken is in progress.
 */
export class BulksInProgress {
  private readonly key: string;

  constructor(
    private readonly store: LockStore,
    keys: UniqueJobsKeys,
    /** The shortest lease of an announcement (tests shorten it). */
    private readonly leaseMs = ANNOUNCEMENT_LEASE_MS,
  ) {
    this.key = keys.bulksInProgress;
  }

  /**
   * Announces a bulk, before its first lock is sent; the function answered ends the announcement (call it once the
   * bulk's add is done or failed). A bulk that finds {@link MAX_ANNOUNCED} announcements held goes unannounced.
   * `shortestLeaseMs`: the shortest lease its locks are taken with (its options' lease, before any delay), written in
   * its token (`<ms>:L<lease>:<id>`): a reader under other options (a deploy that changed `lockTtl`) tells a slot's age
   * by it. `entries`: the bulk's size, which lengthens the announcement's lease (its producer's event loop, blocked
   * while the bulk is sent, renews nothing meanwhile).
   */
  async begin(shortestLeaseMs: number, entries: number): Promise<() => Promise<void>> {
    const leaseMs = Math.max(this.leaseMs, Math.ceil(entries * ANNOUNCEMENT_LEASE_PER_ENTRY_MS));
    const token = await this.store.takeStamped(
      this.key,
      `L${Math.max(0, Math.floor(shortestLeaseMs))}:${randomBytes(9).toString('base64url')}`,
      leaseMs,
      MAX_ANNOUNCED,
    );
    if (token === undefined) return () => Promise.resolve();
    // A renewal that fails (Redis away) is tried again at the next period. One that finds the lease ended (a stall
    // longer than two thirds of it) takes the token again, under the same name: its bulk's start, which readers go by,
    // is unchanged. What the reaper or a producer did while it was gone is not undone.
    const keeper = new LeaseKeeper(
      async () => (await this.store.acquire(this.key, token, leaseMs, MAX_ANNOUNCED)).acquired,
      leaseMs,
      {
        lost: () => undefined,
        error: () => undefined,
      },
    );
    return async () => {
      keeper.stop();
      await this.store.release(this.key, token).catch(() => undefined); // not given back: its lease ends it
    };
  }

  /**
   * The bulks announced now (whose lease is live): their tokens, how long ago each began (server clock), and the
   * shortest lease its locks are taken with (0 when its token names none: as short as can be).
   */
  async current(): Promise<{ holder: string; ageMs: number; shortestLeaseMs: number }[]> {
    return (await this.store.holderAges(this.key, MAX_ANNOUNCED)).map((bulk) => ({
      ...bulk,
      shortestLeaseMs: Number(/^\d+:L(\d+):/.exec(bulk.holder)?.[1] ?? 0),
    }));
  }

  /**
   * Whether a bulk announced now may hold a slot with `leftMs` of its lease left: one that began no later than such a
   * slot of its own was taken (its age, by the bulk's shortest lease, at most the bulk's, with a second's allowance
   * for the time between the two readings). A lease longer than the shortest (a delayed entry) only makes a slot look
   * younger, so kept.
   */
  async mayHold(leftMs: number): Promise<boolean> {
    return (await this.current()).some((bulk) => bulk.ageMs + AGE_ALLOWANCE_MS >= bulk.shortestLeaseMs - leftMs);
  }
}
