// Moves that reach BullMQ without going through the library's producer side: FlowProducer children and the jobs of a
// job scheduler. The run-time lock still applies in the worker (the digest is computed from the job's data there); an
// enqueue lock cannot be taken for them (docs/how-locks-move.md says what to do instead). And jobs processed without
// its worker side (by hand, `getNextJob`): what is left of their enqueue locks, and who gives it back.
import { describe, expect, it } from '@jest/globals';
import { FlowProducer, Job } from 'bullmq';
import { OrphanReaper } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { captureLogger } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { bullOptions, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('moves that bypass the producer side', () => {
  const { redis, start, keysOf, onCleanup } = useApps('byp');

  it.each([
    { lockLimit: 1, fate: 'BullMQ deletes it with the job (fast path)' },
    { lockLimit: 2, fate: 'the reaper gives it back (slot set)' },
  ])(
    'until_executed, a job processed by hand (getNextJob, moveToCompleted), lockLimit $lockLimit: its enqueue lock — $fate',
    async ({ lockLimit }) => {
      const app = await start({
        unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id, lockLimit },
        paused: true,
      });
      const added = await app.queue.add('sync', { id: 'u1' });
      const token = 'by-hand';
      const job = await app.worker!.getNextJob(token);
      expect(job.id).toBe(added.id);
      await job.moveToCompleted('done', token, false);
      expect(app.runs).toEqual([]); // the processor never ran: no worker side
      if (lockLimit === 1) {
        expect(await keysOf(app)).toEqual([]);
        return;
      }
      expect(await keysOf(app)).toHaveLength(1);
      const reaper = new OrphanReaper({ client: redis, prefix: app.prefix, options: { grace: 0 } });
      expect((await reaper.run()).items).toEqual([
        expect.objectContaining({ jobId: added.id, reason: 'job finished' }),
      ]);
      await reaper.resign();
      expect(await keysOf(app)).toEqual([]);
    },
  );

  it("until_executed, BullMQ's Job.create on a guarded queue: no enqueue lock, and the worker's warning names it", async () => {
    const captured = captureLogger();
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id },
      paused: true,
      module: { logger: captured.logger },
    });
    const bypassed = await Job.create(app.queue, 'sync', { id: 'u1' });
    expect(await keysOf(app)).toEqual([]); // no lock: the library never saw the add
    const guarded = await app.service.enqueue(app.queue, 'sync', { id: 'u1' });
    expect(guarded.status).toBe('enqueued'); // nothing held the digest
    app.start();
    await waitFor('both jobs run', () => app.runs.length === 2);
    expect(app.runs.map((job) => job.id).sort()).toEqual(
      [bypassed.id, guarded.status === 'enqueued' && guarded.job.id].sort(),
    );
    expect(captured.lines.warn).toEqual([expect.stringContaining("BullMQ's Job.create or Queue#addJob")]);
  });

  it('FlowProducer children of a while_executing queue: two of one digest never run at once', async () => {
    const gates = new Gates().hold('a', 'b');
    const a = await start({
      unique: { lock: 'while_executing', lockArgs: (data: { id: string }) => data.id },
      handler: gates.handler,
      worker: { concurrency: 2 },
    });
    const flows = new FlowProducer(bullOptions());
    onCleanup(() => flows.close());
    const parentQueue = uniqueName('byp-parent');
    onCleanup(async () => {
      const { Queue } = await import('bullmq');
      const parent = new Queue(parentQueue, bullOptions());
      await parent.obliterate({ force: true });
      await parent.close();
    });
    const tree = await flows.add({
      name: 'parent',
      queueName: parentQueue,
      children: [
        { name: 'sync', queueName: a.queue.name, data: { id: 'u1', tag: 'a' } },
        { name: 'sync', queueName: a.queue.name, data: { id: 'u1', tag: 'b' } },
      ],
    });
    // Either child may take the run-time lock first (concurrency 2): the one that started holds it.
    const tagOf = (job: Job) => (job.data as { tag: string }).tag;
    const first = tagOf(await Promise.race([gates.started('a'), gates.started('b')]));
    const other = first === 'a' ? 'b' : 'a';
    const jobOf = (tag: string) => tree.children!.map((child) => child.job).find((job) => tagOf(job) === tag)!;
    // The other child meets the run-time lock of the first and completes without running (`log`).
    await expect(a.finished(jobOf(other).id!)).resolves.toBeNull();
    expect(a.runs.map(tagOf)).toEqual([first]);
    gates.release(first);
    await expect(a.finished(jobOf(first).id!)).resolves.toBe(`ran:${first}`);
    expect(await keysOf(a)).toEqual([]);
  });

  it('FlowProducer children of an until_executed queue take no enqueue lock: a queue.add of the digest is enqueued', async () => {
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id },
      paused: true,
    });
    const flows = new FlowProducer(bullOptions());
    onCleanup(() => flows.close());
    const child = await flows.add({ name: 'sync', queueName: a.queue.name, data: { id: 'u1' } });
    expect(await keysOf(a)).toEqual([]);
    const added = await a.service.enqueue(a.queue, 'sync', { id: 'u1' });
    expect(added.status).toBe('enqueued');
    expect(await a.queue.getJobState(child.job.id!)).toBe('waiting');
  });

  it('jobs of a job scheduler on an until_executed queue take no enqueue lock, and run', async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id } });
    await a.queue.upsertJobScheduler('every-hour', { every: 3_600_000 }, { name: 'sync', data: { id: 'u1' } });
    onCleanup(async () => void (await a.queue.removeJobScheduler('every-hour')));
    await waitFor('the scheduled job to run', () => a.runs.length === 1);
    expect(a.runs[0].data).toEqual({ id: 'u1' });
  });
});
