// Regressions found by the review of the core (dead set and bulk).
import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { asDuplicate, asEnqueued, byId } from '../support/locks.js';
import { waitFor } from '../support/wait.js';

describe('core review regressions: dead set and bulk', () => {
  const { start } = useApps('rvx');

  it('R10 the dead set never lists an entry older than maxAge', async () => {
    const maxAge = 600;
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
      module: { deadSet: { maxAge } },
      paused: true,
    });
    asEnqueued(await a.service.enqueue(a.queue, 'sync', { id: 'u1' }));
    const older = asDuplicate(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 2 }));
    const entry = (await a.service.deadSet.get(older.deadSetEntryId!))!;
    // Time-based transitions: a second rejection a little later, then until the first is older than maxAge.
    await waitFor('half of maxAge', () => Date.now() - entry.rejectedAt > maxAge / 2);
    asDuplicate(await a.service.enqueue(a.queue, 'sync', { id: 'u1', n: 3 }));
    await waitFor('the first entry to pass maxAge', () => Date.now() - entry.rejectedAt > maxAge + 50);
    expect((await a.service.deadSet.list()).map((e) => e.id)).not.toContain(entry.id);
    expect(await a.service.deadSet.size()).toBe(1);
  });

  it('R12 (control) addBulk: two entries with one digest in one call enqueue one job', async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' }, paused: true });
    const results = await a.service.enqueueBulk(a.queue, [
      { name: 'sync', data: { id: 'u1', n: 1 } },
      { name: 'sync', data: { id: 'u1', n: 2 } },
    ]);
    const first = asEnqueued(results[0]);
    expect(asDuplicate(results[1]).existingJobId).toBe(first.job.id);
    expect(await a.queue.getWaitingCount()).toBe(1);
    expect(await a.service.deadSet.size()).toBe(1);
  });
});
