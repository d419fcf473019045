import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { asError } from '../errors/thrown.js';
import type { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import type { RemovableHold } from '../locks/enqueue-lock.js';
import { markedDigestIn } from '../locks/job-marker.js';
import type { JobDefinitions } from '../options/job-definitions.js';
import { bullKeys } from '../redis/keys.js';

/** The queue a job is removed from. */
interface RemovingFrom {
  name: string;
  qualifiedName: string;
}

/** What a job about to be removed holds: its hold, and what the `unlocked` event names. */
export interface RemovingHold {
  name: string;
  digest: string;
  hold: RemovableHold;
}

/**
 * Gives back the slot-set enqueue lock of a job removed through a guarded queue or worker (`job.remove()`,
 * `queue.remove(id)`), read before the removal: it would otherwise outlive the job until the orphan reaper's pass
 * reaches it (BullMQ deletes a deduplication key itself).
 */
export class RemovalRelease {
  constructor(
    private readonly definitions: JobDefinitions,
    private readonly client: Redis | Cluster,
    private readonly events: UniqueJobsEvents,
    private readonly logger: LoggerLike,
  ) {}

  /**
   * The hold of a job about to be removed, if it has one to give back: a job that exists, has not finished (its end gave
   * its hold back; what is left of it is the reaper's) and holds a slot of its definition's lock. A failed read is
   * logged and the removal goes on: the slot is then the reaper's.
   */
  async holdOf(owner: RemovingFrom, jobId: string): Promise<RemovingHold | undefined> {
    // A library connection that is not ready would hold the removal up (ioredis queues the read until it reconnects).
    if (this.client.status !== 'ready') {
      this.logger.warn(
        `Job ${jobId} (queue "${owner.name}") is removed without reading its enqueue lock (the library's Redis connection is ${this.client.status}): the orphan reaper releases it`,
      );
      return undefined;
    }
    try {
      const key = bullKeys.job(owner.qualifiedName, jobId);
      const [name, opts, finishedOn] = await this.client.hmget(key, 'name', 'opts', 'finishedOn');
      const digest = markedDigestIn(opts);
      const lock = name === null ? undefined : this.definitions.find(owner.name, name)?.enqueueLockOf('slot-set');
      if (name === null || finishedOn !== null || !lock || digest === undefined) return undefined;
      const hold = await lock.holdOf(digest, jobId);
      return hold && { name, digest, hold };
    } catch (error) {
      this.logger.warn(
        `Job ${jobId} (queue "${owner.name}") is removed without reading its enqueue lock (${asError(error).message}): the orphan reaper releases it`,
      );
      return undefined;
    }
  }

  /** Gives back the hold of a job just removed. A failure is logged, not thrown: the job is removed. */
  async giveBack(owner: RemovingFrom, jobId: string, { name, digest, hold }: RemovingHold): Promise<void> {
    try {
      if (!(await hold.release())) return;
      this.events.emit({ type: 'unlocked', lock: 'enqueue', queue: owner.name, jobName: name, digest, jobId });
    } catch (error) {
      this.logger.warn(
        `Job ${jobId} (queue "${owner.name}") was removed, but its enqueue lock ${digest} could not be released (${asError(error).message}): the orphan reaper releases it`,
      );
    }
  }
}
