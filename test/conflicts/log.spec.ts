import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { captureLogger, EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { asDuplicate, asEnqueued, byId, dedupHolder } from '../support/locks.js';
import { clientSide, runData, serverSide } from './helpers.js';

type Data = { id: string; tag?: string; n?: number };

describe('onConflict: log', () => {
  const { redis, start, keysOf } = useApps('log');

  describe('client side (until_executed)', () => {
    it('explicit API: the duplicate is reported with the existing job id and nothing more is enqueued', async () => {
      const { logger } = captureLogger();
      const app = await start({
        ...clientSide('log'),
        module: { logger },
      });
      const first = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 1 }));
      const second = await app.service.enqueue(app.queue, 'sync', { id: 'a', n: 2 });

      expect(second).toEqual({
        status: 'duplicate',
        strategy: 'log',
        existingJobId: first.job.id,
        digest: first.digest,
      });
      expect(await app.queue.getJobCounts('waiting', 'delayed', 'active')).toEqual({
        waiting: 1,
        delayed: 0,
        active: 0,
      });
      expect(await dedupHolder(redis, app.queue.name, first.digest!)).toBe(first.job.id);
      expect(await keysOf(app)).toHaveLength(1);
    });

    it('plain queue.add returns a handle with the existing job id (and the data passed), emits "duplicate" and logs a warning', async () => {
      const capture = captureLogger();
      const app = await start({
        ...clientSide('log'),
        module: { logger: capture.logger },
      });
      const events = new EventLog(app);
      const first = await app.queue.add('sync', { id: 'a', n: 1 });
      const second = await app.queue.add('sync', { id: 'a', n: 2 });

      expect(second.id).toBe(first.id);
      // Built locally, as BullMQ's own deduplication does: the holder's id, this call's data (one round trip).
      expect(second.data).toEqual({ id: 'a', n: 2 });
      expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
      expect((await app.queue.getJob(first.id!))?.data).toEqual({ id: 'a', n: 1 });

      const digest = app.service.digestOf(app.queue.name, 'sync', { id: 'a' })!;
      const duplicates = events.of('duplicate');
      expect(duplicates).toHaveLength(1);
      expect(duplicates[0]).toMatchObject({
        type: 'duplicate',
        side: 'client',
        strategy: 'log',
        queue: app.queue.name,
        jobName: 'sync',
        digest,
        existingJobId: first.id,
      });
      const warnings = capture.lines.warn.filter((line) => line.includes(digest));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(app.queue.name);
      expect(warnings[0]).toContain('"sync"');
      expect(warnings[0]).toContain(`locked by job ${first.id}`);
    });

    it('a duplicate of a running job is dropped too; once the job completed the digest is free again', async () => {
      const gates = new Gates().hold('first');
      const app = await start({
        unique: { lock: 'until_executed', onConflict: 'log', lockArgs: byId },
        handler: gates.handler,
      });
      const first = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'a', tag: 'first' }));
      await gates.started('first');
      const dup = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'a', tag: 'second' }));
      expect(dup.existingJobId).toBe(first.job.id);
      gates.release('first');
      await expect(app.finished(first.job)).resolves.toBe('ran:first');
      expect(await keysOf(app)).toEqual([]);

      const again = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'a', tag: 'third' }));
      await expect(app.finished(again.job)).resolves.toBe('ran:third');
      expect(runData<Data>(app).map((data) => data.tag)).toEqual(['first', 'third']);
    });
  });

  describe('server side (while_executing)', () => {
    it('a second job meeting the run-time lock completes without its handler running (return value undefined)', async () => {
      const gates = new Gates().hold('first');
      const capture = captureLogger();
      const app = await start({
        ...serverSide('log', gates),
        module: { logger: capture.logger },
      });
      const events = new EventLog(app);
      const first = await app.queue.add('sync', { id: 'a', tag: 'first' });
      await gates.started('first');
      // while_executing has no enqueue lock: the second job is enqueued...
      const second = await app.queue.add('sync', { id: 'a', tag: 'second' });
      expect(second.id).not.toBe(first.id);
      // ...and skipped when it meets the run-time lock.
      // The strategy returns undefined, which BullMQ stores (like any handler returning nothing) as null.
      await expect(app.finished(second)).resolves.toBeNull();
      expect(await app.queue.getJobState(second.id!)).toBe('completed');
      expect((await app.queue.getJob(second.id!))?.returnvalue).toBeNull();
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(await app.queue.getJobState(first.id!)).toBe('active');

      const digest = app.service.digestOf(app.queue.name, 'sync', { id: 'a' })!;
      expect(events.of('duplicate')).toEqual([
        expect.objectContaining({ side: 'server', strategy: 'log', digest, jobId: second.id, existingJobId: first.id }),
      ]);
      expect(capture.lines.warn.some((line) => line.includes(digest) && line.includes(`job ${second.id}`))).toBe(true);
      expect(await keysOf(app)).toEqual([`${app.prefix}:{${digest}}:running`]);

      gates.release('first');
      await expect(app.finished(first)).resolves.toBe('ran:first');
      expect(await keysOf(app)).toEqual([]);
      expect(app.runs).toHaveLength(1);
    });

    it('jobs with different digests are not conflicts: both run concurrently', async () => {
      const gates = new Gates().hold('a', 'b');
      const app = await start({
        unique: { lock: 'while_executing', onConflict: 'log', lockArgs: (data: { tag: string }) => data.tag },
        handler: gates.handler,
        worker: { concurrency: 2 },
      });
      const a = await app.queue.add('sync', { tag: 'a' });
      const b = await app.queue.add('sync', { tag: 'b' });
      await Promise.all([gates.started('a'), gates.started('b')]);
      expect(await keysOf(app)).toHaveLength(2);
      gates.releaseAll();
      await expect(app.finished(a)).resolves.toBe('ran:a');
      await expect(app.finished(b)).resolves.toBe('ran:b');
    });
  });
});
