import { once } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { UnrecoverableError, type Job } from 'bullmq';
import { useApps } from '../support/apps.js';
import { captureLogger, EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { bullPrefix } from '../support/redis.js';
import { asDuplicate, asEnqueued, dedupHolder } from '../support/locks.js';
import { clientSide, runData, serverSide, workerOf } from './helpers.js';

type Data = { id: string; tag?: string; n?: number };

describe('onConflict: reject', () => {
  const { redis, start, keysOf } = useApps('rej');

  describe('client side (until_executed)', () => {
    it('a duplicate lands in the dead set with its payload, digest, existing job id and side "client"', async () => {
      const capture = captureLogger();
      const app = await start({
        ...clientSide('reject'),
        module: { logger: capture.logger },
      });
      const events = new EventLog(app);
      const first = asEnqueued(await app.service.enqueue(app.queue, 'refund', { id: 'a', n: 1 }));
      const before = Date.now();
      const dup = asDuplicate(
        await app.service.enqueue(app.queue, 'refund', { id: 'a', n: 2 }, { priority: 3, attempts: 2 }),
      );
      expect(dup).toMatchObject({ strategy: 'reject', existingJobId: first.job.id, digest: first.digest });
      expect(dup.deadSetEntryId).toEqual(expect.any(String));

      const entry = await app.service.deadSet.get(dup.deadSetEntryId!);
      expect(entry).toEqual({
        id: dup.deadSetEntryId,
        queue: app.queue.name,
        bullPrefix: bullPrefix(),
        jobName: 'refund',
        data: { id: 'a', n: 2 },
        opts: { priority: 3, attempts: 2 },
        digest: first.digest,
        existingJobId: first.job.id,
        side: 'client',
        reason: expect.stringContaining(`locked by job ${first.job.id}`),
        rejectedAt: expect.any(Number),
      });
      expect(entry!.rejectedAt).toBeGreaterThanOrEqual(before - 1000);
      expect(entry!.jobId).toBeUndefined();
      expect(await app.service.deadSet.list()).toEqual([entry]);
      expect(await app.service.deadSet.size()).toBe(1);

      // Nothing more was enqueued and the lock stays with the existing job.
      expect(await app.queue.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({
        waiting: 1,
        prioritized: 0,
        delayed: 0,
      });
      expect(await dedupHolder(redis, app.queue.name, first.digest!)).toBe(first.job.id);
      expect(events.of('rejected')).toEqual([
        expect.objectContaining({
          side: 'client',
          digest: first.digest,
          existingJobId: first.job.id,
          deadSetEntryId: dup.deadSetEntryId,
        }),
      ]);
      expect(capture.lines.warn.some((line) => line.includes(dup.deadSetEntryId!))).toBe(true);
    });

    it('plain queue.add returns a handle with the existing job id and still keeps the duplicate in the dead set', async () => {
      const app = await start(clientSide('reject'));
      const first = await app.queue.add('refund', { id: 'a', n: 1 });
      const second = await app.queue.add('refund', { id: 'a', n: 2 });
      expect(second.id).toBe(first.id);
      expect(second.data).toEqual({ id: 'a', n: 2 }); // the data passed: the handle is built locally
      const entries = await app.service.deadSet.list();
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({ data: { id: 'a', n: 2 }, existingJobId: first.id, side: 'client' });
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    });
  });

  describe('server side (while_executing)', () => {
    it('a job meeting the run-time lock goes to the dead set and fails unrecoverably without running', async () => {
      const gates = new Gates().hold('first');
      const app = await start(serverSide('reject', gates));
      const events = new EventLog(app);
      const worker = workerOf(app);
      const first = await app.queue.add('refund', { id: 'a', tag: 'first' });
      await gates.started('first');
      const failed = once(worker, 'failed') as Promise<[Job, Error]>;
      // attempts: 3 shows the failure is unrecoverable: no retry is made.
      const second = await app.queue.add('refund', { id: 'a', tag: 'second' }, { attempts: 3, priority: 2 });

      const [failedJob, error] = await failed;
      expect(failedJob.id).toBe(second.id);
      expect(error).toBeInstanceOf(UnrecoverableError);
      await expect(app.finished(second)).rejects.toThrow(/Rejected duplicate job "refund"/);
      expect(await app.queue.getJobState(second.id!)).toBe('failed');
      expect((await app.queue.getJob(second.id!))?.attemptsMade).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);

      const digest = app.service.digestOf(app.queue.name, 'refund', { id: 'a' })!;
      const entries = await app.service.deadSet.list();
      expect(entries).toEqual([
        {
          id: expect.any(String),
          queue: app.queue.name,
          bullPrefix: bullPrefix(),
          jobName: 'refund',
          data: { id: 'a', tag: 'second' },
          opts: expect.objectContaining({ attempts: 3, priority: 2 }),
          digest,
          existingJobId: first.id,
          jobId: second.id,
          side: 'server',
          reason: expect.stringContaining(`locked by job ${first.id}`),
          rejectedAt: expect.any(Number),
        },
      ]);
      expect(entries[0].opts).not.toHaveProperty('jobId');
      expect(entries[0].opts).not.toHaveProperty('uniqueJobs');
      expect(error.message).toContain(entries[0].id);
      expect(events.of('rejected')).toEqual([
        expect.objectContaining({ side: 'server', digest, existingJobId: first.id, deadSetEntryId: entries[0].id }),
      ]);

      // The holder was untouched.
      expect(await app.queue.getJobState(first.id!)).toBe('active');
      gates.release('first');
      await expect(app.finished(first)).resolves.toBe('ran:first');
      expect(await keysOf(app)).toEqual([]);
    });

    it('a server-side entry retried after the holder finished is enqueued again and runs', async () => {
      const gates = new Gates().hold('first');
      const app = await start(serverSide('reject', gates));
      const first = await app.queue.add('refund', { id: 'a', tag: 'first' });
      await gates.started('first');
      const second = await app.queue.add('refund', { id: 'a', tag: 'second' });
      await expect(app.finished(second)).rejects.toThrow(/Rejected/);
      const [entry] = await app.service.deadSet.list();
      gates.release('first');
      await app.finished(first);

      const retried = asEnqueued((await app.service.deadSet.retry(entry.id))!);
      expect(retried.job.id).not.toBe(second.id);
      expect(retried.job.data).toEqual({ id: 'a', tag: 'second' });
      await expect(app.finished(retried.job)).resolves.toBe('ran:second');
      expect(await app.service.deadSet.size()).toBe(0);
      expect(runData<Data>(app).map((data) => data.tag)).toEqual(['first', 'second']);
    });
  });
});
