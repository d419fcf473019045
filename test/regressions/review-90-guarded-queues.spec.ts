// Review 90: the sweep of closed guarded queues (15112af) forgets a queue by its qualified name. A queue registered
// with BullModule (open for the life of the app) shares that name with a short-lived `new Queue(sameName)` the
// application guards by hand and closes after use (a script, a cron task): the guard remembered only the latest queue
// of the name, so the sweep dropped the name, and the open queue with it: the reaper and metrics no longer list it,
// and a dead-set entry of that queue can no longer be retried ("is not registered in this application").
import { describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { JobInterceptor } from '../../lib/nest/job.interceptor.js';
import { useApps } from '../support/apps.js';
import { byId } from '../support/locks.js';
import { bullOptions, bullPrefix, uniqueName } from '../support/redis.js';

/** Enough queues guarded and closed to reach the sweep (it starts at 64 remembered queues). */
const CHURN = 70;

describe('review 90: closed guarded queues swept', () => {
  const { start } = useApps('rv90gq', {
    unique: { lock: 'until_executed', onConflict: 'reject', lockArgs: byId },
    paused: true,
  });

  it('G1 a closed hand-guarded queue of the same name does not take the registered open queue with it', async () => {
    const app = await start();
    const dup = await app.service.enqueue(app.queue, 'sync', { id: 'g1' });
    const rejected = await app.service.enqueue(app.queue, 'sync', { id: 'g1' });
    expect(rejected).toMatchObject({ status: 'duplicate' });
    const entryId = (rejected as { deadSetEntryId?: string }).deadSetEntryId!;
    expect(entryId).toBeDefined();

    // The same queue, opened by hand for a moment, guarded, used and closed.
    const temporary = app.service.guardQueue(
      new Queue(app.queue.name, { connection: bullOptions().connection, prefix: bullPrefix() }),
    );
    await temporary.close();
    // Other short-lived queues (per tenant) reach the sweep.
    const tenant = uniqueName('rv90tenant');
    for (let i = 0; i < CHURN; i++) {
      const queue = app.service.guardQueue(
        new Queue(`${tenant}-${i}`, { connection: bullOptions().connection, prefix: bullPrefix() }),
      );
      await queue.close();
    }

    // The registered queue is still open and guarded: still listed (reaper, metrics)…
    const listed = app.moduleRef.get(JobInterceptor).guardedQueues();
    expect(listed.map((queue) => queue.name)).toContain(app.queue.name);
    // …and its dead-set entry is retried through it (the rejected duplicate is still a duplicate of the queued job).
    await expect(app.service.deadSet.retry(entryId)).resolves.toMatchObject({
      status: 'duplicate',
      existingJobId: (dup as { job: { id: string } }).job.id,
    });
  });
});
