import type { RedisScripts } from './redis-scripts.js';
import { bullKeys, PARKED_FIELD, STEPS_FIELD } from './keys.js';
import { readJobStanding, readParkerStanding, standingOf, type JobStanding } from './job-standing.js';

/** A job as {@link BullJobReads.record} read it. */
export interface JobRecord {
  /** Its id, and its Redis key. */
  jobId: string;
  jobKey: string;
  standing: JobStanding;
  /** Its creation time (BullMQ's `timestamp`), unless gone. */
  createdAt?: number;
  /** Why BullMQ failed it, when it is in its queue's `failed` set. */
  failedReason?: string;
}

/**
 * What BullMQ did with a job, read from Redis as BullMQ wrote it: the job's hash (its standing, options and the counts
 * the library keeps there), its lock, and its queue's event stream. The library decides from these, never from a
 * re-implementation of BullMQ's rules. Each read is one call (a removal's, a few pages at most).
 */
export class BullJobReads {
  constructor(private readonly scripts: RedisScripts) {}

  /** The id of the last entry of a stream (a queue's event stream), `undefined` when it is empty. */
  async lastEventId(stream: string): Promise<string | undefined> {
    return (await this.scripts.client.xrevrange(stream, '+', '-', 'COUNT', 1))[0]?.[0];
  }

  /**
   * The state BullMQ removed a job from, read from its queue's event stream past `since` (an entry read before the job
   * was last checked, {@link lastEventId}): the `prev` of BullMQ's `removed` event, which a removal that found the job
   * writes in its own script, or `'active'` when an `active` event of the job comes first (it started past `since`,
   * whatever state it was removed from: back waiting or delayed for a retry). `undefined`: no such event (nothing of
   * the job was removed past `since`); `'unread'`: the stream cannot tell (trimmed past `since`, empty, or more than a
   * few thousand entries to read).
   */
  async removedFrom(stream: string, since: string | undefined, jobId: string): Promise<string | undefined> {
    let start = since ?? '-';
    for (let page = 0; page < REMOVAL_PAGES; page++) {
      const entries = await this.scripts.client.xrange(stream, start, '+', 'COUNT', REMOVAL_PAGE);
      // Trimmed past it, or empty: a queue whose events are kept to none (`streams.events.maxLen` 0) keeps no removal.
      if (page === 0 && (entries.length === 0 || (since !== undefined && entries[0][0] !== since))) return 'unread';
      for (const [id, fields] of entries) {
        if (id === start) continue;
        const event = new Map<string, string>();
        for (let i = 0; i + 1 < fields.length; i += 2) event.set(fields[i], fields[i + 1]);
        if (event.get('jobId') !== jobId) continue;
        if (event.get('event') === 'active') return 'active';
        if (event.get('event') === 'removed') return event.get('prev') ?? 'unread';
      }
      if (entries.length < REMOVAL_PAGE) return undefined;
      start = entries.at(-1)![0];
    }
    return 'unread';
  }

  /**
   * Where a job stands by its hash (see `standingOf`), with what BullMQ recorded of it: its creation time (`timestamp`,
   * what tells it from a later job given its id) and, when BullMQ holds it failed (in its queue's `failed` set: a
   * completed job keeps the `failedReason` of an earlier attempt it retried), why. One transaction (the job's hash and
   * its queue's set share a slot on a Cluster, as BullMQ requires).
   */
  async record(qualifiedName: string, jobId: string): Promise<JobRecord> {
    const jobKey = bullKeys.job(qualifiedName, jobId);
    const answers = await this.scripts.client
      .multi()
      .hmget(jobKey, 'timestamp', 'finishedOn', 'failedReason')
      .zscore(bullKeys.queueKey(qualifiedName, 'failed'), jobId)
      .exec();
    if (!answers) throw new Error(`The read of job ${jobKey} was discarded`);
    for (const [error] of answers) if (error) throw error;
    const [timestamp, finishedOn, failedReason] = answers[0][1] as (string | null)[];
    const standing = standingOf(timestamp, finishedOn);
    if (standing === 'gone') return { jobId, jobKey, standing };
    const failed = answers[1][1] !== null;
    return {
      jobId,
      jobKey,
      standing,
      createdAt: parseInt(timestamp!, 10),
      ...(failed ? { failedReason: failedReason ?? '' } : {}),
    };
  }

  /** Where a job stands by its hash (see `standingOf`). */
  standing(jobKey: string): Promise<JobStanding> {
    return readJobStanding(this.scripts.client, jobKey);
  }

  /** Where the job a run-time lock slot parked under `digest` names stands (see `readParkerStanding`). */
  parkerStanding(jobKey: string, digest: string): Promise<JobStanding | 'another'> {
    return readParkerStanding(this.scripts.client, jobKey, digest);
  }

  /**
   * Names in a job's hash the digest of the run-time lock slot its step is about to park (`PARKED_FIELD`), counting the
   * step (`STEPS_FIELD`) when `countStep`, only while the job exists and its starts (BullMQ's `ats`) are still
   * `starts`, the parking delivery's; resolves whether it did.
   */
  async markParked(jobKey: string, digest: string, countStep: boolean, starts: number): Promise<boolean> {
    const args = [PARKED_FIELD, digest, countStep ? STEPS_FIELD : '', 'ats', String(starts)];
    return Number(await this.scripts.run('markParked', [jobKey], args)) === 1;
  }

  /** Whether a job's hash exists. */
  async exists(jobKey: string): Promise<boolean> {
    return (await this.scripts.client.exists(jobKey)) === 1;
  }

  /**
   * Whether a job exists, BullMQ has not finished it (its hash has no `finishedOn`) and no worker runs it but the one
   * holding `token` (its `<job>:lock` is absent or holds that token).
   */
  async live(qualifiedName: string, jobId: string, token: string | undefined): Promise<boolean> {
    const [[, fields], [, runner]] = (await this.scripts.client
      .multi()
      .hmget(bullKeys.job(qualifiedName, jobId), 'timestamp', 'finishedOn')
      .get(bullKeys.jobLock(qualifiedName, jobId))
      .exec()) as [[unknown, (string | null)[]], [unknown, string | null]];
    return standingOf(fields[0], fields[1]) === 'live' && (runner === null || runner === token);
  }

  /** Whether BullMQ's lock of a job (`<job>:lock`) holds `token`: the worker that took the job with it still runs it. */
  async holdsLock(qualifiedName: string, jobId: string, token: string): Promise<boolean> {
    return (await this.scripts.client.get(bullKeys.jobLock(qualifiedName, jobId))) === token;
  }

  /** A count the library keeps in a job's hash (`field`: `RESCHEDULES_FIELD`, `STEPS_FIELD`); 0: none. */
  async countOf(jobKey: string, field: string): Promise<number> {
    return Number((await this.scripts.client.hget(jobKey, field)) ?? 0);
  }

  /**
   * Counts of a job's hash (BullMQ's `ats`, `atm`, or the library's; 0 for a field not there) and the last entry of its
   * queue's event stream ({@link lastEventId}), read at once (one transaction: the stream and the job share their
   * queue's slot).
   */
  async countsAt(
    stream: string,
    jobKey: string,
    fields: readonly string[],
  ): Promise<{ since: string | undefined; counts: number[] }> {
    const answers = await this.scripts.client
      .multi()
      .xrevrange(stream, '+', '-', 'COUNT', 1)
      .hmget(jobKey, ...fields)
      .exec();
    if (!answers) throw new Error('the read of a job and its queue stream was discarded');
    for (const [error] of answers) if (error) throw error;
    const last = answers[0][1] as [string, string[]][];
    const values = answers[1][1] as (string | null)[];
    return { since: last[0]?.[0], counts: values.map((value) => Number(value ?? 0)) };
  }

  /** Counts one more in a job's hash (see {@link countOf}), only while the job exists; the count, 0 when it is gone. */
  async countIn(jobKey: string, field: string): Promise<number> {
    return Number(await this.scripts.run('countInJob', [jobKey], [field]));
  }

  /** The options a job was stored with (its hash's `opts` field), or `undefined` when the job does not exist. */
  async options(jobKey: string): Promise<Record<string, unknown> | undefined> {
    const opts = await this.scripts.client.hget(jobKey, 'opts');
    return opts === null ? undefined : (JSON.parse(opts) as Record<string, unknown>);
  }
}

/** Entries of a queue's event stream read per call, and calls at most, looking for a job's removal. */
const REMOVAL_PAGE = 500;
const REMOVAL_PAGES = 8;
