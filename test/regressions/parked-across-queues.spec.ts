// Review helper-160 (session 51), finding C: a run-time lock across queues (`uniqueAcross: ['queues']`). A parked step
// job of queue A removed without the library: a job of the digest on queue B did not give the slot back (another
// queue's holder was left to the reaper), so with the reaper on at its default interval it was dropped (`log`) until a
// pass, the slot lasting a day past the removed job's run time since session 51. The take now finds the holder's queue
// by its owner's tag among the queues the library's processes record, and gives the slot back (freeStaleParked).
import { describe, expect, it } from '@jest/globals';
import { DelayedError, Queue, type Job } from 'bullmq';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, runningKey, runtimeOwner, waitForParked } from '../support/locks.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('a parked job of another queue removed (lock across queues, reaper on)', () => {
  const { redis, start, keysOf, onCleanup } = useApps('rv51-across');

  it('a job of the digest on the other queue runs once the old parked end passed', async () => {
    const lease = 200;
    const ran: string[] = [];
    const ref: { a?: TestApp } = {};
    const unique = {
      lock: 'while_executing' as const,
      lockArgs: byId,
      jobName: 'sync',
      onConflict: 'log' as const,
      runtimeLockLease: lease,
      uniqueAcross: ['queues' as const],
    };
    const handler = async (job: Job<{ id: string; park?: boolean }>) => {
      ran.push(`${job.queueName === ref.a!.queue.name ? 'A' : 'B'}:${job.id}`);
      if (!job.data.park) return 'done';
      await job.updateData({ ...job.data, park: false });
      await job.moveToDelayed(Date.now() + 300, job.token);
      await ref.a!.queue.pause();
      throw new DelayedError();
    };
    const a = (ref.a = await start({ unique, handler }));
    const b = await start({ unique, handler, module: { prefix: a.prefix } });
    const running = runningKey(a.prefix, digestOf(a, 'sync', { id: 'a' }));
    expect(runningKey(b.prefix, digestOf(b, 'sync', { id: 'a' }))).toBe(running);
    const first = await a.queue.add('sync', { id: 'a', park: true }, { jobId: uniqueName('step') });
    await waitForParked(redis, running, runtimeOwner(a, first.id!));
    const parkedAt = Date.now();
    const unguarded = new Queue(a.queue.name, bullOptions());
    onCleanup(() => unguarded.close());
    await (await unguarded.getJob(first.id!))!.remove();
    await waitFor('the former parked end to pass', () => Date.now() > parkedAt + 300 + lease + 500, 10_000);
    const next = await b.queue.add('sync', { id: 'a' }, { jobId: uniqueName('next') });
    const result = await b.finished(next);
    const slot = await owners(redis, running);
    await redis.del(running);
    expect({ result, ran, slot }).toEqual({ result: 'done', ran: [`A:${first.id}`, `B:${next.id}`], slot: [] });
    expect((await keysOf(a)).filter((key) => !key.endsWith('{reaper}:leader'))).toEqual([]);
  }, 30_000);
});
