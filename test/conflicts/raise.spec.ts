import { once } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { DuplicateJobError, UniqueJobsError } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { asEnqueued, dedupHolder } from '../support/locks.js';
import { clientSide, runData, serverSide, workerOf } from './helpers.js';

type Data = { id: string; tag?: string; n?: number };

describe('onConflict: raise', () => {
  const { redis, start, keysOf } = useApps('raise');

  describe('client side (until_executed)', () => {
    it('plain queue.add throws DuplicateJobError carrying the existing job id; nothing is enqueued', async () => {
      const app = await start(clientSide('raise'));
      const events = new EventLog(app);
      const first = await app.queue.add('charge', { id: 'a', n: 1 });
      const error = await app.queue.add('charge', { id: 'a', n: 2 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      const digest = app.service.digestOf(app.queue.name, 'charge', { id: 'a' })!;
      expect(error).toBeInstanceOf(DuplicateJobError);
      expect(error).toBeInstanceOf(UniqueJobsError);
      expect(error).toMatchObject({ existingJobId: first.id, digest, queueName: app.queue.name, jobName: 'charge' });
      expect((error as Error).message).toContain(`locked by job ${first.id}`);

      expect(await app.queue.getJobCounts('waiting', 'delayed', 'active')).toEqual({
        waiting: 1,
        delayed: 0,
        active: 0,
      });
      expect((await app.queue.getJob(first.id!))?.data).toEqual({ id: 'a', n: 1 });
      expect(await dedupHolder(redis, app.queue.name, digest)).toBe(first.id);
      expect(events.of('duplicate')).toEqual([
        expect.objectContaining({ side: 'client', strategy: 'raise', digest, existingJobId: first.id }),
      ]);
    });

    it('explicit API returns the duplicate result and never throws', async () => {
      const app = await start(clientSide('raise'));
      const first = asEnqueued(await app.service.enqueue(app.queue, 'charge', { id: 'a', n: 1 }));
      await expect(app.service.enqueue(app.queue, 'charge', { id: 'a', n: 2 })).resolves.toEqual({
        status: 'duplicate',
        strategy: 'raise',
        existingJobId: first.job.id,
        digest: first.digest,
      });
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    });

    it('a raised duplicate leaves the lock with its holder: the holder runs, then the digest can be enqueued again', async () => {
      const app = await start(clientSide('raise'));
      const first = await app.queue.add('charge', { id: 'a', n: 1 });
      await expect(app.queue.add('charge', { id: 'a', n: 2 })).rejects.toBeInstanceOf(DuplicateJobError);
      app.start();
      await app.finished(first);
      expect(await keysOf(app)).toEqual([]);
      const third = await app.queue.add('charge', { id: 'a', n: 3 });
      expect(third.id).not.toBe(first.id);
      await app.finished(third);
      expect(runData<Data>(app).map((data) => data.n)).toEqual([1, 3]);
    });
  });

  describe('server side (while_executing)', () => {
    it('the attempt of a job meeting the run-time lock fails with DuplicateJobError (no retries: the job fails)', async () => {
      const gates = new Gates().hold('first');
      const app = await start(serverSide('raise', gates));
      const events = new EventLog(app);
      const worker = workerOf(app);
      const first = await app.queue.add('charge', { id: 'a', tag: 'first' });
      await gates.started('first');
      const failed = once(worker, 'failed') as Promise<[Job, Error]>;
      const second = await app.queue.add('charge', { id: 'a', tag: 'second' });

      const [failedJob, error] = await failed;
      expect(failedJob.id).toBe(second.id);
      expect(error).toBeInstanceOf(DuplicateJobError);
      expect(error).toMatchObject({ existingJobId: first.id });
      await expect(app.finished(second)).rejects.toThrow(/Duplicate job "charge"/);
      expect(await app.queue.getJobState(second.id!)).toBe('failed');
      expect((await app.queue.getJob(second.id!))?.attemptsMade).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(events.of('duplicate')).toEqual([
        expect.objectContaining({ side: 'server', strategy: 'raise', jobId: second.id, existingJobId: first.id }),
      ]);

      gates.release('first');
      await expect(app.finished(first)).resolves.toBe('ran:first');
      expect(await keysOf(app)).toEqual([]);
    });

    it('with attempts and a backoff the job is retried and runs once the holder finished', async () => {
      const gates = new Gates().hold('first');
      const app = await start(serverSide('raise', gates));
      const worker = workerOf(app);
      const failures: [string | undefined, unknown][] = [];
      worker.on('failed', (job, error) => failures.push([job?.id, error]));
      const first = await app.queue.add('charge', { id: 'a', tag: 'first' });
      await gates.started('first');
      const firstFailure = once(worker, 'failed');
      const second = await app.queue.add(
        'charge',
        { id: 'a', tag: 'second' },
        { attempts: 3, backoff: { type: 'fixed', delay: 500 } },
      );
      await firstFailure;
      // The failed attempt was counted and the job waits for its retry; the holder is untouched.
      expect(await app.queue.getJobState(second.id!)).toBe('delayed');
      expect((await app.queue.getJob(second.id!))?.attemptsMade).toBe(1);
      expect(await app.queue.getJobState(first.id!)).toBe('active');
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);

      gates.release('first');
      await expect(app.finished(first)).resolves.toBe('ran:first');
      await expect(app.finished(second)).resolves.toBe('ran:second');
      expect(app.runs.map((job) => job.id)).toEqual([first.id, second.id]);
      const done = await app.queue.getJob(second.id!);
      expect(done?.attemptsMade).toBeGreaterThanOrEqual(2);
      // Every failed attempt was the duplicate error, and the job ran exactly once.
      expect(failures.length).toBe(done!.attemptsMade - 1);
      for (const [jobId, error] of failures) {
        expect(jobId).toBe(second.id);
        expect(error).toBeInstanceOf(DuplicateJobError);
      }
      expect(await keysOf(app)).toEqual([]);
    });
  });
});
