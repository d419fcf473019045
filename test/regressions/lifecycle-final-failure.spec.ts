// L3: whether BullMQ runs a job again is BullMQ's decision (maxStartedAttempts, a backoff strategy answering -1, an
// error NAMED UnrecoverableError or DelayedError, …), not a copy of its rule: after a final failure the enqueue lock is
// gone and a kept idempotency failure is stored; a job moved to delayed by its handler keeps its lock.
import { describe, expect, it } from '@jest/globals';
import type { JobsOptions, WorkerOptions } from 'bullmq';
import { IdempotencyKeyFailedError, type IdempotencyJob } from '../../lib/index.js';
import { workerOf } from '../conflicts/helpers.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { byId, enqueuedJob } from '../support/locks.js';
import { Outcomes } from '../support/outcomes.js';
import type { TestJob } from '../locks/helpers.js';
import { enqueueHolders, enqueueUnlocked, eventWithin } from './lifecycle-helpers.js';

/** How long the fixed code may take to report a release that follows BullMQ's `failed` (milliseconds, in fact). */
const RELEASE_BOUND_MS = 5_000;

/** A final failure BullMQ decides although `attemptsMade + 1 < attempts`. */
interface FinalFailure {
  worker: Partial<WorkerOptions>;
  opts: JobsOptions;
  error: () => Error;
}

const FINAL_FAILURES: [string, FinalFailure][] = [
  [
    '(a) worker maxStartedAttempts 1, job attempts 3',
    { worker: { maxStartedAttempts: 1 }, opts: { attempts: 3 }, error: () => new Error('boom') },
  ],
  [
    '(b) attempts 3 with a custom backoff whose strategy answers -1',
    {
      worker: { settings: { backoffStrategy: () => -1 } },
      opts: { attempts: 3, backoff: { type: 'custom' } },
      error: () => new Error('boom'),
    },
  ],
  [
    '(c) attempts 3, an error named UnrecoverableError that is not BullMQ’s class',
    {
      worker: {},
      opts: { attempts: 3 },
      error: () => Object.assign(new Error('boom'), { name: 'UnrecoverableError' }),
    },
  ],
];

const PATHS = [
  ['fast path with lockTtl', 'fast', { lockTtl: 60_000 }],
  ['general path (lockLimit 2)', 'general', { lockLimit: 2 }],
] as const;

/** Every (final failure, lock path) pair. */
const FAILURES_ON_PATHS = FINAL_FAILURES.flatMap(([label, failure]) =>
  PATHS.map(([pathLabel, path, unique]) => [label, pathLabel, failure, path, unique] as const),
);

describe('L3 a final failure is what BullMQ decides', () => {
  const { redis, start } = useApps('lcfin');

  it.each(FAILURES_ON_PATHS)(
    'L3 until_executed %s, %s: the job fails for good and its enqueue lock is released',
    async (_label, _pathLabel, failure, path, unique) => {
      const app = await start({
        unique: { lock: 'until_executed', lockArgs: byId, ...unique },
        worker: failure.worker,
        handler: async (job: TestJob) => {
          if (job.data.n === 1) throw failure.error();
          return job.data.n;
        },
      });
      const events = new EventLog(app);
      const failed = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 1 }, failure.opts));
      await expect(app.finished(failed)).rejects.toThrow('boom');
      // BullMQ did not retry: the job is failed after one attempt.
      expect(await app.queue.getJobState(failed.id!)).toBe('failed');
      expect((await app.queue.getJob(failed.id!))!.attemptsMade).toBe(1);

      await eventWithin(events, enqueueUnlocked(failed.id), RELEASE_BOUND_MS);
      // Today the library believes a retry follows and keeps the lock (24 h on the general path, lockTtl on the fast one).
      expect(await enqueueHolders(redis, app, path, { id: 'u1' })).toEqual([]);
      const again = await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 2 });
      expect(again.status).toBe('enqueued');
      await expect(app.finished(enqueuedJob(again))).resolves.toBe(2);
    },
  );

  it.each(PATHS)(
    'L3d until_executed, %s: a job its handler moved to delayed (an error NAMED DelayedError) is delayed and keeps its lock',
    async (_pathLabel, path, unique) => {
      const otherStarted = hold();
      const app = await start({
        unique: { lock: 'until_executed', lockArgs: byId, ...unique },
        paused: true,
        handler: async (job: TestJob) => {
          if (job.data.id === 'u1' && job.data.n === 1) {
            await job.moveToDelayed(Date.now() + 60_000, job.token);
            throw Object.assign(new Error('later'), { name: 'DelayedError' });
          }
          otherStarted.resolve();
          return job.data.n;
        },
      });
      const delayed = enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 1 }, { attempts: 1 }));
      // A job of another digest, behind it: with concurrency 1 it starts once the worker is done with the first job,
      // including what the library does after its handler threw.
      enqueuedJob(await app.service.enqueue(app.queue, 'sync', { id: 'other', n: 2 }));
      app.start();
      await otherStarted.promise;
      expect(app.runs.map((job) => (job.data as { id: string }).id)).toEqual(['u1', 'other']);

      expect(await app.queue.getJobState(delayed.id!)).toBe('delayed');
      // Today the error is not BullMQ's DelayedError class, so the library takes it for a final failure and releases.
      expect(await enqueueHolders(redis, app, path, { id: 'u1' })).toEqual([delayed.id]);
      if (path === 'fast') {
        expect(await app.service.enqueue(app.queue, 'sync', { id: 'u1', n: 3 })).toMatchObject({
          status: 'duplicate',
          existingJobId: delayed.id,
        });
      }
    },
  );

  it.each(FINAL_FAILURES)(
    "L3e @IdempotencyKey onFailure 'keep', %s: the final failure is kept; a later job with the key fails with IdempotencyKeyFailedError without running",
    async (_label, failure) => {
      const app = await start({
        idempotency: { key: (job: IdempotencyJob<{ id: string }>) => job.data.id, onFailure: 'keep' },
        worker: failure.worker,
        handler: async () => {
          throw failure.error();
        },
      });
      const outcomes = new Outcomes(workerOf(app));
      const first = await app.queue.add('charge', { id: 'k1' }, failure.opts);
      await outcomes.failures(first.id!);
      expect(await app.queue.getJobState(first.id!)).toBe('failed');

      const later = await app.queue.add('charge', { id: 'k1' }, { attempts: 1 });
      const [error] = await outcomes.failures(later.id!);
      // Today the claim was released (the library expected a retry), so the later job ran the handler again.
      expect(error).toBeInstanceOf(IdempotencyKeyFailedError);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    },
  );
});
