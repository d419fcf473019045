// Found by the hostile review of session 24: queue.addBulk where a duplicate's (custom) client strategy throws, and a
// later general-path entry is refused by BullMQ's pipeline (a missing parent, answered with an error code). The bulk
// fails with the strategy's error, but every entry is settled first: the refused entry gets no lock (it kept one for
// its whole lease).
import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';

describe('a client strategy that throws in the middle of an addBulk', () => {
  const apps = useApps('bulkthrow');

  it('the later entry refused by BullMQ keeps no lock', async () => {
    const app = await apps.start({
      paused: true,
      module: {
        reaper: { interval: false },
        strategies: [
          {
            name: 'explode',
            sides: ['client'],
            onClientConflict: async () => {
              throw new Error('custom strategy failed');
            },
          },
        ],
      },
      unique: [
        { jobName: 'dupe', lock: 'until_executed', onConflict: 'explode', lockArgs: (d: { id: string }) => [d.id] },
        { jobName: 'limited', lock: 'until_executed', lockLimit: 2, lockArgs: (d: { id: string }) => [d.id] },
      ],
    });
    await app.queue.add('dupe', { id: 'held' });
    const keysBefore = await apps.keysOf(app);
    const outcome = await app.queue
      .addBulk([
        { name: 'dupe', data: { id: 'held' } },
        {
          name: 'limited',
          data: { id: 'orphan' },
          opts: { parent: { id: 'no-such-parent', queue: `bull:${app.queue.name}-gone` } },
        },
      ])
      .then(
        (jobs) => `returned ${jobs.map((j) => j.id).join(',')}`,
        (e: unknown) => `threw ${(e as Error).message}`,
      );
    const keysAfter = await apps.keysOf(app);
    const counts = await app.queue.getJobCounts();
    const slots: { key: string; holders: string[]; pttl: number }[] = [];
    for (const key of keysAfter.filter((k) => !keysBefore.includes(k))) {
      slots.push({ key, holders: await apps.redis.zrange(key, '0', '-1'), pttl: await apps.redis.pttl(key) });
    }
    expect(outcome).toBe('threw custom strategy failed');
    expect(slots).toEqual([]);
    expect(counts).toMatchObject({ waiting: 1 });
  });
});
