// `reaper.grace` was taken from 0 without a word. With no grace a suspect is confirmed at once, so a run that meets a
// general-path enqueue between its lock and its add (one round trip apart) releases the lock of a job about to be
// added: the job then waits without it, and a duplicate enqueued next takes the digest beside it. 0 stays accepted
// (tests run the reaper by hand while nothing is enqueued), but a grace below 1,000 ms is warned about at bootstrap.
import { describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { UniqueJobsReaper } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { captureLogger } from '../support/events.js';
import { byId, digestOf, owners, queuedKey } from '../support/locks.js';
import { bullOptions } from '../support/redis.js';

/** A general-path lock (a slot set). */
const unique = { lock: 'until_executed' as const, lockArgs: byId, lockLimit: 2 };

describe('reaper.grace below a round trip of safety', () => {
  const { redis, start, onCleanup } = useApps('zero-grace');

  const graceWarnings = (lines: { warn: string[] }) => lines.warn.filter((line) => line.includes('reaper.grace'));

  it('grace 0: warned at bootstrap; a run releases the lock of an enqueue whose add is on its way', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({ unique, paused: true, module: { logger, reaper: { interval: false, grace: 0 } } });
    expect(graceWarnings(lines)).toHaveLength(1);
    expect(graceWarnings(lines)[0]).toContain('reaper.grace is 0 ms, below 1000');

    // An enqueue through a queue whose add waits at a gate: its lock is taken, its job not added yet.
    const queue = new Queue(app.queue.name, bullOptions());
    onCleanup(() => queue.close());
    const locked = deferred<void>();
    const gate = deferred<void>();
    const add = queue.add.bind(queue);
    queue.add = async (...args: Parameters<Queue['add']>) => {
      locked.resolve();
      await gate.promise;
      return add(...args);
    };
    const enqueue = app.service.enqueue(queue, 'sync', { id: 'z' });
    await locked.promise;
    const slot = queuedKey(app.prefix, digestOf(app, 'sync', { id: 'z' }));
    expect(await owners(redis, slot)).toHaveLength(1);

    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    expect(report.reaped.enqueueLocks).toBe(1);
    gate.resolve();
    expect((await enqueue).status).toBe('enqueued');
    // The job was added without its lock: two more of the digest take both slots of a lockLimit of 2.
    expect(await owners(redis, slot)).toEqual([]);
    for (let i = 0; i < 2; i++)
      expect((await app.service.enqueue(app.queue, 'sync', { id: 'z' })).status).toBe('enqueued');
    expect(await app.queue.count()).toBe(3);
  });

  it('grace of 1,000 ms or more, or the default: no warning', async () => {
    for (const reaper of [{ interval: false as const, grace: 1_000 }, { interval: false as const }]) {
      const { logger, lines } = captureLogger();
      await start({ unique, paused: true, module: { logger, reaper } });
      expect(graceWarnings(lines)).toEqual([]);
    }
  });
});
