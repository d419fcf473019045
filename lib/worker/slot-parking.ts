import type { Job } from 'bullmq';
import type { RuntimeLease } from '../locks/runtime-lease.js';
import { PARKED_MARK } from '../locks/lock-marks.js';
import type { LockStore } from '../locks/lock-store.js';
import type { JobDefinition } from '../options/job-definitions.js';
import { bullKeys, STEPS_FIELD, type UniqueJobsKeys } from '../redis/keys.js';
import { runtimeOwnersOf } from '../redis/runtime-lock-owner.js';

/** What a parking did with the run-time lock slots: whether one is parked, and whether the attempt's slot was released. */
export interface Parked {
  parked: boolean;
  released: boolean;
}

/**
 * The run-time lock slot of a step job between its deliveries (one {@link JobRun}'s): parked for the job's next delivery
 * under the digest that delivery will compute, and given back once BullMQ failed the job for good. The steps the
 * handler moved the job through are counted in its hash (`STEPS_FIELD`), beside the digest parked under
 * (`PARKED_FIELD`).
 */
export class SlotParking {
  constructor(
    private readonly job: Job<unknown, unknown>,
    private readonly definition: JobDefinition,
    private readonly digest: string,
    /** Whether the digest was computed from the job's data (no enqueue lock fixed it): a step may change it. */
    private readonly digestFromData: boolean,
    private readonly store: LockStore,
    private readonly keys: UniqueJobsKeys,
  ) {}

  /**
   * Parks the slot for the job's next delivery, `leaseMs` from now, under the digest that delivery will compute: a
   * digest computed from the job's data moves with it when the step stored new data that changes it (`job.updateData`,
   * BullMQ's step pattern, with lock arguments that read the step). The next delivery, and a guarded `changeDelay` or
   * `promote`, look for the parked slot there; left under the old digest, it outlived the job and refused a new job of
   * the data this one started with. Parked there as a take of this owner, not re-entrant: a slot the owner holds there
   * already is left as it is (the next delivery may have taken it already, the job being due at once: re-taken, its
   * mark would be replaced and its lease reported lost), and none is parked when that digest is full (the next delivery
   * then meets its holder), nor kept when the job's next delivery started before it; the old slot is given back
   * (`released`: it was still the attempt's). The job's hash first names the digest parked under (and counts the step,
   * `countStep`): a take or the reaper meeting the slot tells its parker from a later job given its id (see
   * `readParkerStanding`). A job gone meanwhile parks nothing, nor does a delivery whose job started again since (due at
   * once: that delivery's own park names its digest), and a mark that fails parks nothing either (it throws, the slot
   * given back: a slot its parker cannot be told by would be taken for another job's).
   */
  async park(lease: RuntimeLease, leaseMs: number, countStep: boolean): Promise<Parked> {
    const moved = this.digestMoved();
    const parkedIn = moved ?? this.digest;
    let marked: boolean;
    try {
      marked = await this.store.jobs.markParked(this.jobKey(), parkedIn, countStep, this.job.attemptsStarted);
    } catch (error) {
      await lease.release();
      throw error;
    }
    if (!marked) return { parked: false, released: await lease.release() };
    if (moved === undefined) return { parked: await lease.park(leaseMs), released: false };
    const { store, keys, definition } = this;
    const key = keys.runtimeLock(moved);
    const { owner } = this.owners();
    const taken = await store.acquire(key, owner, leaseMs, definition.options.lockLimit, false, PARKED_MARK);
    // A job due at once may have been delivered again before that take, and even completed: a slot parked for a
    // delivery that started already would outlive the job (no delivery re-enters it). Its starts (BullMQ's `ats`,
    // counted as a delivery begins) tell: when they moved on, the slot is given back unless that delivery re-entered it
    // (its take replaced the parked mark). One read more, only for a step that moved its digest.
    let parked = taken.acquired;
    if (parked && (await store.jobs.countOf(this.jobKey(), 'ats')) !== this.job.attemptsStarted) {
      await store.releaseMarked(key, owner, PARKED_MARK);
      parked = false;
    }
    return { parked, released: await lease.release() };
  }

  /** Whether the handler moved the job through a step before (counted as each step parks: `markParked`). */
  async stepped(): Promise<boolean> {
    return (await this.store.jobs.countOf(this.jobKey(), STEPS_FIELD)) > 0;
  }

  /**
   * Gives back a slot parked for the job's next delivery, also one an earlier build parked under its former owner
   * (no delivery took it over). One Redis call; resolves whether one was held.
   */
  async giveBack(): Promise<boolean> {
    const { owner, former } = this.owners();
    return this.store.releaseParked(this.keys.runtimeLock(this.digest), owner, former);
  }

  /** The job's run-time lock owner (its queue and id), and the one earlier builds wrote (an older worker's slot). */
  owners(): { owner: string; former: string } {
    return runtimeOwnersOf(this.job, this.definition.options.uniqueAcross.includes('queues'));
  }

  /** The digest of the job's current data when it differs from the run's (computed from the data it started with). */
  private digestMoved(): string | undefined {
    if (!this.digestFromData) return undefined;
    let now: string;
    try {
      now = this.definition.digestOf(this.job);
    } catch {
      return undefined; // lock arguments that cannot be hashed now: the next delivery fails, its slot is kept as it was
    }
    return now === this.digest ? undefined : now;
  }

  /** The job's hash. */
  private jobKey(): string {
    return bullKeys.job(this.job.queueQualifiedName, this.job.id!);
  }
}
