import type { Job, MinimalQueue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { RecentEntries } from '../common/recent-entries.js';
import type { UniqueJobsKeys } from '../redis/keys.js';
import { promote, promoteAll } from './promote-delayed.js';
import { ownerTag, parseWaitingMessage, WaitersChannel, type Announcement, type Waiter } from './waiters-channel.js';

/** A delivery of this process delayed while it waits, and the worker that promotes it. */
interface DelayedJob {
  worker: WorkerLike;
  jobId: string;
}

/** A worker (or queue), as far as promoting its jobs is concerned. */
export type WorkerLike = MinimalQueue & { qualifiedName: string };

/** Deliveries waiting for one key, by queue and job id (a delivery that announces itself again is kept once). */
type Waiters = Map<string, Waiter>;

/** The holder of a key in this process: the worker its job runs on, and the deliveries waiting for it. */
interface Holding {
  queue: WorkerLike;
  waiters: Waiters;
  /** The holder's owner token (`undefined` when not given). */
  owner?: string;
}

/** How long an announcement for a key this process does not hold is kept, in case its claim is being answered. */
const PENDING_MS = 2_000;
/** Most such announcements kept at once (every process hears every announcement of its prefix). */
const MAX_PENDING = 10_000;
/** Most deliveries of this process remembered as waiting (beyond that, one waits for the holder's lease). */
const MAX_DELAYED = 10_000;
/** Most deliveries remembered as waiting for one key (beyond that, one waits for the holder's lease). */
const MAX_WAITERS_PER_KEY = 1_000;
/**
 * Most deliveries remembered in all (held keys' waiters, announcements kept, deliveries delayed here): about 200 bytes
 * each, so at most ~20 MB whatever the traffic. Beyond that, a delivery waits for the holder's lease.
 */
const MAX_REMEMBERED = 100_000;

/**
 * Wakes the deliveries that wait for a key in progress the moment its holder settles it, instead of when the holder's
 * lease could have ended. A waiting delivery moves itself to delayed (the lease is the upper bound, for a holder that
 * died) and announces itself on a Redis channel; every process listens, and the one holding the key remembers it and
 * promotes it (delayed → waiting) once the record is completed, failed or released. A delivery of another queue (a
 * scope shared across queues: the holder's worker may not reach that queue) is promoted by its own process instead,
 * which the holder tells on the same channel that the record is settled. A delivery that announces itself after the
 * holder settled sees the settled record when it checks again, and promotes itself; one whose check came before the
 * settle, its announcement heard after it, is woken by the holder's process, which remembers the keys it settled in the
 * last {@link PENDING_MS}. Costs nothing to a job that no one
 * waits for: one subscriber connection per process, opened with the first key a worker holds.
 */
export class WaitingDuplicates {
  private readonly held = new Map<string, Holding>();
  /**
   * Announcements of keys this process did not hold when they came: a holder's claim can answer it a moment after a
   * waiter's claim answered the waiter, so `holding` adopts what came in the last {@link PENDING_MS}.
   */
  private readonly pending = new RecentEntries<{ at: number; waiters: Waiters }>(MAX_PENDING);
  /**
   * Keys this process settled in the last {@link PENDING_MS}, with the worker of the job that held them and the owner
   * tokens a delivery that looked before the settle saw (hashed only when such an announcement comes): a delivery
   * whose announcement comes after the settle (the channel is slower than the store) and whose own look at the record
   * came before it is promoted at once, instead of waiting for the holder's lease.
   */
  private readonly recent = new RecentEntries<{ at: number; queue: WorkerLike; owners?: string[] }>(MAX_PENDING);
  /**
   * The deliveries this process delayed, by record, until their delay ends: promoted here when the holder of the record
   * (running a job of another queue) says it settled it.
   */
  private readonly delayed = new Map<string, { until: number; jobs: Map<string, DelayedJob> }>();
  /** Entries in the waiter maps of {@link held}, {@link pending} and {@link delayed} together. */
  private remembered = 0;
  /** Where deliveries announce themselves and holders say a key settled. */
  private readonly channel: WaitersChannel;

  constructor(client: Redis | Cluster, keys: UniqueJobsKeys, logger: LoggerLike) {
    this.channel = new WaitersChannel(client, keys, logger, (message) => this.heard(message));
  }

  /**
   * A delivery of this process got its claim's answer for `recordId`: it is no longer waiting, so a later "settled" of
   * the key must not promote it out of a delay it gets afterwards (a retry's backoff). It is remembered again if it
   * waits again.
   */
  answered(recordId: string, worker: WorkerLike, jobId: string): void {
    const entry = this.delayed.get(recordId);
    if (!entry?.jobs.delete(`${worker.qualifiedName}\0${jobId}`)) return;
    this.remembered--;
    if (entry.jobs.size === 0) this.delayed.delete(recordId);
  }

  /**
   * This process holds the key of `recordId` for a job of `queue` (the claim of `owner`): remember the deliveries that
   * announce themselves.
   */
  holding(recordId: string, queue: Holding['queue'], owner?: string): void {
    const early = this.pending.get(recordId);
    this.pending.delete(recordId);
    const adopted = early && Date.now() - early.at < PENDING_MS ? early.waiters : undefined;
    if (early && !adopted) this.remembered -= early.waiters.size;
    this.forgetAll(this.held.get(recordId)?.waiters);
    this.held.set(recordId, {
      queue,
      waiters: adopted ?? new Map<string, Waiter>(),
      ...(owner === undefined ? {} : { owner }),
    });
    void this.listen();
  }

  /**
   * Starts listening (at bootstrap, when a processor has `@IdempotencyKey`: announcements are never stored). A start
   * that failed is forgotten: the next key this process holds, or the next delivery it delays, tries again.
   */
  listen(): Promise<void> {
    return this.channel.listen();
  }

  /**
   * The holder settled the record (completed, failed or released it), or handed it over to its job's next delivery
   * (`handedOver`: a step job's step): the waiting deliveries of its queue run now. `resumedFrom`: the resume token the
   * holder's claim took the record over from (a later step), which deliveries that looked before that claim saw.
   */
  settled(recordId: string, how: { handedOver?: boolean; resumedFrom?: string } = {}): void {
    const holding = this.held.get(recordId);
    if (!holding) return;
    this.held.delete(recordId);
    this.forgetAll(holding.waiters);
    this.recent.dropOlder(Date.now(), PENDING_MS);
    this.recent.delete(recordId); // settled again: set anew below, as the youngest
    if (this.recent.size < MAX_PENDING) {
      // Who a delivery that looked before this settle saw: the holder, or before its claim the handover it resumed. Not
      // that handover after a handover: the record is parked under the same token again, not free.
      const owners =
        holding.owner === undefined
          ? undefined
          : how.resumedFrom === undefined || how.handedOver
            ? [holding.owner]
            : [holding.owner, how.resumedFrom];
      this.recent.set(recordId, { at: Date.now(), queue: holding.queue, ...(owners ? { owners } : {}) });
    }
    let elsewhere = false;
    const here: { worker: WorkerLike; jobId: string }[] = [];
    for (const waiter of holding.waiters.values()) {
      if (waiter.queue === holding.queue.qualifiedName) here.push({ worker: holding.queue, jobId: waiter.jobId });
      else elsewhere = true;
    }
    if (here.length > 0) void promoteAll(here);
    // A waiter of another queue (a scope shared across queues): its own process promotes it, through its worker. So is,
    // when a later step of a step job settles the record for good, a delivery that met it parked between two steps: it
    // announced itself when no process held the key, and was forgotten {@link PENDING_MS} later (a step delayed longer
    // than that); it waited a whole lease after the job completed.
    const finalStep = how.resumedFrom !== undefined && !how.handedOver;
    if (!elsewhere && !finalStep) return;
    this.channel.announceSettled(recordId);
  }

  /**
   * A record parked between two steps of its job (held by no process: its job's resume token owns it) was settled for
   * a job that will not come back for it: every process wakes the deliveries it delayed for it now, rather than when
   * they look again (within a lease). A delivery that looked before and is delayed after this finds the record settled
   * and promotes itself ({@link delay}).
   */
  parkedSettled(recordId: string): void {
    this.wake(recordId);
    this.channel.announceSettled(recordId);
  }

  /**
   * Delays a delivery that waits for the key of `recordId`, held by `owner` when it looked (`undefined`: not known):
   * announces it to the holder (wherever it runs), moves it to delayed for `delayMs` (the upper bound), then promotes
   * it itself if the holder settled the record meanwhile.
   */
  async delay(
    job: Job<unknown, unknown>,
    token: string | undefined,
    recordId: string,
    delayMs: number,
    worker: WorkerLike,
    stillHeld: () => Promise<boolean>,
    owner?: string,
  ): Promise<void> {
    const waiter: Waiter = { queue: job.queueQualifiedName, jobId: job.id! };
    void this.listen(); // a holder of another queue tells this process on the channel when it settles the key
    this.remember(recordId, worker, waiter.jobId, delayMs);
    // Not announced (a Redis user without the channel, Redis away): it still waits, for the holder's lease at most.
    const announcement: Announcement = {
      recordId,
      ...waiter,
      ...(owner === undefined ? {} : { saw: ownerTag(owner) }),
    };
    await this.channel.announce(announcement);
    await job.moveToDelayed(Date.now() + delayMs, token);
    // Settled before the holder heard of this delivery: nobody will promote it, so it promotes itself.
    if (!(await stillHeld())) await promote(worker, waiter.jobId);
  }

  /** Stops listening (module shutdown). */
  async close(): Promise<void> {
    this.channel.close();
    this.held.clear();
    this.pending.clear();
    this.recent.clear();
    this.delayed.clear();
    this.remembered = 0;
  }

  /** Remembers a delivery of this process delayed for `recordId` (for at most `delayMs`). */
  private remember(recordId: string, worker: WorkerLike, jobId: string, delayMs: number): void {
    const now = Date.now();
    if (this.delayed.size >= MAX_DELAYED || this.remembered >= MAX_REMEMBERED) {
      for (const [id, entry] of this.delayed) {
        if (entry.until > now) continue;
        this.delayed.delete(id);
        this.forgetAll(entry.jobs);
      }
      if (this.delayed.size >= MAX_DELAYED) return;
    }
    const entry = this.delayed.get(recordId) ?? { until: 0, jobs: new Map<string, DelayedJob>() };
    entry.until = Math.max(entry.until, now + delayMs);
    if (!this.add(entry.jobs, `${worker.qualifiedName}\0${jobId}`, { worker, jobId })) return;
    this.delayed.set(recordId, entry);
  }

  /**
   * Adds `value` to one key's `waiters` once: at most {@link MAX_WAITERS_PER_KEY} there and {@link MAX_REMEMBERED} in
   * all (the others wait for the lease). `false` when it was not added.
   */
  private add<V>(waiters: Map<string, V>, id: string, value: V): boolean {
    if (waiters.has(id)) return true;
    if (waiters.size >= MAX_WAITERS_PER_KEY || this.remembered >= MAX_REMEMBERED) return false;
    waiters.set(id, value);
    this.remembered++;
    return true;
  }

  /** Counts a waiter map that was dropped out of {@link remembered}. */
  private forgetAll(waiters: Map<string, unknown> | undefined): void {
    this.remembered -= waiters?.size ?? 0;
  }

  /** The holder of `recordId` settled it: the deliveries this process delayed for it run now. */
  private wake(recordId: string): void {
    const entry = this.delayed.get(recordId);
    if (!entry) return;
    this.delayed.delete(recordId);
    this.forgetAll(entry.jobs);
    if (entry.until <= Date.now()) return;
    void promoteAll([...entry.jobs.values()]);
  }

  private heard(message: string): void {
    const heard = parseWaitingMessage(message);
    if (heard === undefined) return;
    if ('settled' in heard) {
      this.wake(heard.settled);
      return;
    }
    const waiter = heard;
    const entry = { queue: waiter.queue, jobId: waiter.jobId };
    const id = `${entry.queue}\0${entry.jobId}`;
    const holding = this.held.get(waiter.recordId);
    if (holding) {
      this.add(holding.waiters, id, entry);
      return;
    }
    const now = Date.now();
    const justSettled = this.recent.get(waiter.recordId);
    // Only a delivery that looked before the settle (it saw the owner that settled, or does not say) is woken: one that
    // saw another holder (the key claimed again, or a step job's claim handed over to the job's next delivery) would
    // meet that holder again at once, and announce itself again, in a loop for as long as the settle is recent. It is
    // kept for the holder it saw instead (below), as any announcement of a key this process does not hold.
    const sawSettled =
      justSettled?.owners === undefined ||
      waiter.saw === undefined ||
      justSettled.owners.some((owner) => ownerTag(owner) === waiter.saw);
    if (justSettled && now - justSettled.at < PENDING_MS && sawSettled) {
      // Announced just after this process settled the key: woken now (it claims again, and waits again if another
      // holder took the key meanwhile). A delivery of another queue is woken by its own process.
      if (entry.queue === justSettled.queue.qualifiedName) void promote(justSettled.queue, entry.jobId);
      else this.channel.announceSettled(waiter.recordId);
      return;
    }
    for (const early of this.pending.dropOlder(now, PENDING_MS)) this.forgetAll(early.waiters);
    if (this.pending.size >= MAX_PENDING && !this.pending.has(waiter.recordId)) return;
    const early = this.pending.get(waiter.recordId) ?? { at: now, waiters: new Map<string, Waiter>() };
    if (this.add(early.waiters, id, entry)) this.pending.set(waiter.recordId, early);
  }
}
