// Session 38, review of the session's diff (e26fbc9..). Each case failed before its fix.
import { describe, expect, it } from '@jest/globals';
import type { UniqueJobOptions } from '../../lib/index.js';
import { expectLocked, lockState } from '../../lib/ops/testing/index.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, queuedKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';

// `expectLocked({ holder })` was told a holder of another queue apart on the run-time lock alone: an enqueue lock shared
// across queues (a slot set: its members are job ids, whatever the queue) held by another queue's job with that (caller)
// id passed for a job of the queue asked about.
describe('D1 expectLocked with a holder, for an enqueue lock across queues held by another queue’s job with that id', () => {
  const { start, redis } = useApps('s38d-expect');
  const across: UniqueJobOptions = { lock: 'until_executed', lockArgs: byId, uniqueAcross: 'queues', jobName: 'sync' };

  it('fails, naming the other queue; passes from the holder’s own queue', async () => {
    const prefix = uniqueName('s38d-expect-prefix');
    const a = await start({ unique: across, paused: true, module: { prefix } });
    const b = await start({ unique: across, paused: true, module: { prefix } });
    const jobId = uniqueName('same-id');
    await b.queue.add('sync', { id: 'x' }, { jobId });
    const digest = digestOf(a, 'sync', { id: 'x' });
    expect(digestOf(b, 'sync', { id: 'x' })).toBe(digest);
    expect(await owners(redis, queuedKey(prefix, digest))).toEqual([jobId]);

    const state = await lockState(a.moduleRef, a.queue, 'sync', { id: 'x' });
    expect(state.enqueue).toEqual({
      key: queuedKey(prefix, digest),
      holders: [jobId],
      holderQueues: [b.queue.qualifiedName],
    });
    await expect(expectLocked(a.moduleRef, a.queue, 'sync', { id: 'x' }, { holder: jobId })).rejects.toThrow(
      `held by job(s) ${jobId} (of queue ${b.queue.qualifiedName})`,
    );
    await expect(
      expectLocked(b.moduleRef, b.queue, 'sync', { id: 'x' }, { kind: 'enqueue', holder: jobId }),
    ).resolves.toEqual({ digest, enqueue: { key: queuedKey(prefix, digest), holders: [jobId] } });
    await (await b.queue.getJob(jobId))!.remove();
  }, 30_000);
});
