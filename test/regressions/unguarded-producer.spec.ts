// A job whose lock type takes its lock at enqueue, added by a producer the library does not guard (here a plain BullMQ
// Queue; in an application, a process whose forRoot() has no `jobs` definition of it, a FlowProducer, a job
// scheduler): its duplicates were never refused, and the worker used to run them all without a word. Found by session
// 35's new-user review (a split producer/worker app with inline @UniqueJob options deduplicated nothing, silently).
import { describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { useApps } from '../support/apps.js';
import { captureLogger } from '../support/events.js';
import { bullOptions } from '../support/redis.js';

describe('a job that reaches the worker without its enqueue lock', () => {
  const { start, onCleanup } = useApps('unguarded-producer');

  it('runs under its run-time checks and warns once per job definition, naming what to do', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({ unique: { lock: 'until_executed', onConflict: 'reject' }, module: { logger } });
    // The same queue, through BullMQ's own Queue (never passed to guardQueue): no lock at enqueue.
    const plain = new Queue(app.queue.name, bullOptions());
    onCleanup(() => plain.close());
    const jobs = [await plain.add('sync', { id: 1 }), await plain.add('sync', { id: 1 })];
    for (const job of jobs) await app.finished(job);
    // Both ran: nothing refused the duplicate at enqueue (what the warning says).
    expect(app.runs.map((job) => job.id)).toEqual(jobs.map((job) => job.id));
    const warned = () => lines.warn.filter((line) => line.includes('without the enqueue lock'));
    // Said before the handler ran (the digest is computed first).
    expect(warned()).toHaveLength(1);
    expect(warned()[0]).toContain(`Job ${jobs[0].id} ("sync" on queue "${app.queue.name}")`);
    expect(warned()[0]).toContain('until_executed');
    expect(warned()[0]).toContain('`jobs: [...]` to forRoot()');

    // A job added through the guarded queue took its lock: no warning for it.
    const guarded = await app.queue.add('sync', { id: 2 });
    await app.finished(guarded);
    expect(warned()).toHaveLength(1);
  });

  it('says nothing for a lock type that takes no lock at enqueue (while_executing)', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({ unique: { lock: 'while_executing' }, module: { logger } });
    const plain = new Queue(app.queue.name, bullOptions());
    onCleanup(() => plain.close());
    await app.finished(await plain.add('sync', { id: 1 }));
    expect(app.runs).toHaveLength(1);
    expect(lines.warn.filter((line) => line.includes('without the enqueue lock'))).toEqual([]);
  });
});
