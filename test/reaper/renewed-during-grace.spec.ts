// A general-path slot of a job removed behind the library's back, whose lease the library moved while the reaper's
// grace ran (a retry's backoff retime, or a guarded changeDelay, that crossed the removal: both keep the slot's mark),
// is released by that run: the compare-and-set is on the mark for a job gone, not on the lease read before the grace
// (which left the slot to the next interval). A finished job keeps the exact-lease compare: one retried meanwhile
// re-enters its slot with the same mark. Found by helper-143 (the lifecycle model under injected delays, session 45).
import { describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { UniqueJobsReaper } from '../../lib/index.js';
import { UNIQUE_JOBS_DEFINITIONS, UNIQUE_JOBS_REDIS } from '../../lib/nest/unique-jobs.constants.js';
import type { JobDefinitions } from '../../lib/options/job-definitions.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, owners, queuedKey, removeUnguarded } from '../support/locks.js';
import { redisClient } from '../support/redis.js';

describe('the reaper and a lease moved during its grace', () => {
  const { redis, start, onCleanup } = useApps('reap-renewed');

  it('releases the slot of a job gone although its lease moved (its mark kept) after the reaper read it', async () => {
    const connection = redisClient(); // the library's own client: the test sees the reaper's read of the slot
    onCleanup(async () => void (await connection.quit()));
    const app = await start({
      paused: true,
      unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      module: { connection, reaper: { interval: false, grace: 1_000 } },
    });
    const job = await app.queue.add('sync', { id: 'rn' });
    const digest = digestOf(app, 'sync', { id: 'rn' });
    const key = queuedKey(app.prefix, digest);
    onCleanup(async () => void (await redis.del(key)));
    expect(await owners(redis, key)).toEqual([job.id]);
    await removeUnguarded(app.queue.name, job.id!);

    const { client } = app.moduleRef.get<{ client: Redis }>(UNIQUE_JOBS_REDIS);
    let slotRead!: () => void;
    const read = new Promise<void>((resolve) => (slotRead = resolve));
    const call = client.call.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { call: typeof call }).call = async (...args) => {
      const answer = await call(...args);
      if (args[0] === 'ZRANGE' && args[1] === key) slotRead();
      return answer;
    };
    const run = app.moduleRef.get(UniqueJobsReaper).run();
    await read; // the slot is a suspect, with the lease read now; the grace runs
    const before = Number(await redis.zscore(key, job.id!));
    const lock = app.moduleRef.get<JobDefinitions>(UNIQUE_JOBS_DEFINITIONS).find(app.queue.name, 'sync')!.enqueueLock!;
    await lock.retime({ job, digest }, 60_000); // the move that crossed the removal
    const after = Number(await redis.zscore(key, job.id!));
    expect(after).toBeGreaterThan(before + 30_000);
    expect(after % 1).toBe(before % 1);
    await run;
    expect(await owners(redis, key)).toEqual([]);
  });
});
