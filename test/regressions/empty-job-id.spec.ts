// An empty `jobId` is no id to BullMQ (it numbers the job itself), so it is none to the library either: session 49's
// review found it taken for the caller's id — the first job of a free digest reported a duplicate of itself (`reject`
// put it in the dead set, `raise` threw for a job it added, `replace` removed 32 jobs it added), and a slot set held
// nothing.
import { describe, expect, it } from '@jest/globals';
import { DuplicateJobError } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { byId } from '../support/locks.js';

describe("jobId: '' (BullMQ's own id)", () => {
  const { start, keysOf } = useApps('emptyid');
  // With no id of the caller's, a job of the fast path gets one of the library's, a slot set's one of BullMQ's.

  it.each(['reject', 'log', 'replace'] as const)(
    'fast path, %s: the first job is enqueued as if no id was given, the second is its duplicate',
    async (onConflict) => {
      const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, onConflict }, paused: true });
      const replaced: string[] = [];
      const events = app.service.events$.subscribe((e) => void (e.type === 'replaced' && replaced.push(e.jobId)));
      const first = await app.service.enqueue(app.queue, 'sync', { id: 'a' }, { jobId: '' });
      expect(first.status).toBe('enqueued');
      const firstId = first.status === 'enqueued' ? first.job.id : undefined;
      expect(firstId).toMatch(/^.+$/);
      const second = await app.service.enqueue(app.queue, 'sync', { id: 'a' }, { jobId: '' });
      events.unsubscribe();
      const waiting = (await app.queue.getJobs(['waiting'])).map((job) => job.id);
      if (onConflict === 'replace') {
        expect(second.status).toBe('enqueued');
        expect(replaced).toHaveLength(1);
        expect(waiting).toHaveLength(1);
      } else {
        expect(second).toMatchObject({ status: 'duplicate', existingJobId: firstId });
        expect(waiting).toEqual([firstId]);
      }
      expect(await app.service.deadSet.size()).toBe(onConflict === 'reject' ? 1 : 0);
    },
  );

  it('fast path, raise: queue.add adds the first job and throws DuplicateJobError for the second', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'raise' }, paused: true });
    const first = await app.queue.add('sync', { id: 'a' }, { jobId: '' });
    expect(first.id).toMatch(/^.+$/);
    await expect(app.queue.add('sync', { id: 'a' }, { jobId: '' })).rejects.toBeInstanceOf(DuplicateJobError);
    expect((await app.queue.getJobs(['waiting'])).map((job) => job.id)).toEqual([first.id]);
  });

  it('slot set (lockLimit 2) and addBulk: two jobs of a digest are admitted, the third refused, and the lock held', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, paused: true });
    const statuses = [];
    for (const n of [1, 2, 3]) {
      statuses.push((await app.service.enqueue(app.queue, 'sync', { id: 'a', n }, { jobId: '' })).status);
    }
    expect(statuses).toEqual(['enqueued', 'enqueued', 'duplicate']);
    const bulk = await app.service.enqueueBulk(app.queue, [
      { name: 'sync', data: { id: 'b' }, opts: { jobId: '' } },
      { name: 'sync', data: { id: 'b' }, opts: { jobId: '' } },
      { name: 'sync', data: { id: 'b' }, opts: { jobId: '' } },
    ]);
    expect(bulk.map((result) => result.status)).toEqual(['enqueued', 'enqueued', 'duplicate']);
    expect(await app.queue.getWaitingCount()).toBe(4);
    expect(await keysOf(app)).toHaveLength(2);
  });
});
