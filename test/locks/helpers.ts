import { randomUUID } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import { bullOptions } from '../support/redis.js';

/** The data of the jobs in these tests: `id` is the lock argument. */
export type TestJob = Job<{ id: string; n?: number; fail?: boolean }>;

/**
 * A crashed worker: takes the next job of the queue (the app's worker must be paused) with a 500 ms BullMQ lock that
 * nobody renews, and never finishes it. The job stalls once the lock expires.
 */
export async function takeWithCrashingWorker(queueName: string): Promise<{ job: Job; close(): Promise<void> }> {
  const worker = new Worker(queueName, null, { ...bullOptions(), lockDuration: 500, autorun: false });
  const job = await worker.getNextJob(randomUUID());
  if (!job) {
    await worker.close(true);
    throw new Error('the crashing worker got no job');
  }
  return { job, close: () => worker.close(true) };
}

/** Records when each handler call started and ended. */
export interface Interval {
  id: string;
  key: string;
  start: number;
  end: number;
}

/** Whether any two intervals (of the same `key`) overlap in time. */
export function overlapping(intervals: readonly Interval[]): [Interval, Interval] | undefined {
  for (let i = 0; i < intervals.length; i++) {
    for (let j = i + 1; j < intervals.length; j++) {
      const a = intervals[i];
      const b = intervals[j];
      if (a.key === b.key && a.start < b.end && b.start < a.end) return [a, b];
    }
  }
  return undefined;
}
