import type { Cluster, Redis } from 'ioredis';
import type { BullJobReads, JobRecord } from './bull-job-reads.js';
import type { UniqueJobsKeys } from './keys.js';

/** The job a record is parked for, as its mark names it. */
export interface ParkedJob {
  /** Its queue's qualified name (`<BullMQ prefix>:<queue>`: where it lives), and its id. */
  qualifiedName: string;
  jobId: string;
  /** Its queue's name and its own (what the events of its settling name). */
  queue: string;
  jobName: string;
}

/**
 * Where the step job an idempotency record is parked for lives ({@link UniqueJobsKeys.parkedRecord}): written by the
 * library's processes when a step hands its record over, removed when the job's next delivery resumes it, kept at most
 * as long as the record's parked lease. A record keeps its job's id, not its queue (a SQL store), and a SQL store may
 * serve deployments on other Redis servers: a delivery meeting a parked record reads its job only through this mark,
 * so a job it cannot see is never taken for gone.
 */
export class ParkedRecordMarks {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly keys: UniqueJobsKeys,
    private readonly jobs: BullJobReads,
  ) {}

  /** Marks the record `resumeOwner` owns as parked for the job `parker`, for `ttlMs`. */
  async mark(resumeOwner: string, parker: ParkedJob, ttlMs: number): Promise<void> {
    const ttl = Math.max(1, Math.ceil(ttlMs));
    const value = JSON.stringify([parker.qualifiedName, parker.jobId, parker.queue, parker.jobName]);
    await this.client.set(this.keys.parkedRecord(resumeOwner), value, 'PX', ttl);
  }

  /** Removes the mark (the record was resumed or settled). */
  async unmark(resumeOwner: string): Promise<void> {
    await this.client.del(this.keys.parkedRecord(resumeOwner));
  }

  /**
   * The job a record `resumeOwner` owns is parked for, as BullMQ holds it now (one read of the mark, then one of the
   * job); `undefined` when this Redis holds no mark of it (parked by another deployment, by a build before the marks,
   * or its mark lapsed).
   */
  async parkerOf(resumeOwner: string): Promise<(JobRecord & { mark: ParkedJob }) | undefined> {
    const text = await this.client.get(this.keys.parkedRecord(resumeOwner));
    const parker = text === null ? undefined : parseMark(text);
    return parker && { ...(await this.jobs.record(parker.qualifiedName, parker.jobId)), mark: parker };
  }
}

function parseMark(text: string): ParkedJob | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    const valid = Array.isArray(value) && value.length === 4 && value.every((part) => typeof part === 'string');
    if (!valid) return undefined;
    const [qualifiedName, jobId, queue, jobName] = value as [string, string, string, string];
    return { qualifiedName, jobId, queue, jobName };
  } catch {
    return undefined;
  }
}
