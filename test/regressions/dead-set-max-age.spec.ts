// A dead-set entry older than `deadSet.maxAge` is dropped by the next add, or with the dead set's keys, which expire
// maxAge after the last add; until then (a younger entry keeps the keys) `list` and `size` already left it out, but
// `get` still returned it, `retry` enqueued its job again (or, its lock held, put it back as a new entry, young again),
// and `delete` said it deleted it. Every read and action now treats it as gone, as the list does (the admin page and
// API call these same methods; the CLI, which does not know the application's maxAge, sees every entry, in its list as
// in the rest).
import { describe, expect, it } from '@jest/globals';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { useApps } from '../support/apps.js';
import { asDuplicate, asEnqueued, byId } from '../support/locks.js';
import { waitFor } from '../support/wait.js';

/** Long enough for the test's reads to fit between the old entry's maxAge and the young one's. */
const MAX_AGE = 3_000;

describe('a dead-set entry older than maxAge, not dropped yet', () => {
  const { redis, start } = useApps('deadage');

  /** Redis' clock (ms), which scores the entries. */
  async function serverNow(): Promise<number> {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Number(micros) / 1000;
  }

  it('get, retry and delete treat it as gone, as list and size do; a younger entry is still served', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
      module: { deadSet: { maxAge: MAX_AGE } },
      paused: true,
    });
    const deadSet = app.service.deadSet;
    const holder = asEnqueued(await app.service.enqueue(app.queue, 'sync', { id: 'd' }));
    const old = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'd', n: 1 })).deadSetEntryId!;
    const oldAddedBy = await serverNow();
    // Time-based transitions (the entries' age): a younger entry half a maxAge later, then until the first is too old.
    await waitFor('half of maxAge', async () => (await serverNow()) > oldAddedBy + MAX_AGE / 2, MAX_AGE);
    const young = asDuplicate(await app.service.enqueue(app.queue, 'sync', { id: 'd', n: 2 })).deadSetEntryId!;
    await holder.job.remove(); // a retry would enqueue, not meet the lock
    await waitFor(
      'the first entry to pass maxAge',
      async () => (await serverNow()) > oldAddedBy + MAX_AGE + 10,
      MAX_AGE,
    );

    const keys = new UniqueJobsKeys(app.prefix);
    expect(await redis.hexists(keys.deadSetEntries, old)).toBe(1); // not dropped yet
    expect((await deadSet.list()).map((entry) => entry.id)).toEqual([young]);
    expect(await deadSet.size()).toBe(1);
    expect(await deadSet.get(old)).toBeUndefined();
    expect(await deadSet.retry(old)).toBeUndefined();
    expect(await app.queue.getWaitingCount()).toBe(0); // nothing enqueued for it
    expect(await redis.hexists(keys.deadSetEntries, old)).toBe(0); // and it is dropped
    expect(await deadSet.delete(old)).toBe(false);
    // The younger entry is read and retried as ever.
    expect((await deadSet.get(young))?.id).toBe(young);
    expect((await deadSet.retry(young))?.status).toBe('enqueued');
    expect(await app.queue.getWaitingCount()).toBe(1);
  });
});

// Found by a review (session 38): a retry whose enqueue failed put its entry back as a new one, scored now: young again,
// so a retry failing every few days kept an entry past maxAge forever, and ahead of younger entries when maxSize drops
// the oldest. It is put back with the age it had.
describe('a dead-set entry whose retry failed', () => {
  const { redis, start } = useApps('deadback');

  it('is put back as old as it was', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId },
      module: { deadSet: { maxAge: 60_000 } },
    });
    const deadSet = app.service.deadSet;
    const keys = new UniqueJobsKeys(app.prefix);
    // Its queue is not registered in this application: the retry's enqueue fails.
    const id = await deadSet.add({
      queue: `${app.queue.name}-elsewhere`,
      jobName: 'sync',
      data: { id: 'x' },
      opts: {},
      digest: 'a'.repeat(64),
      existingJobId: '1',
      side: 'client',
      reason: 'test',
    });
    const score = await redis.zscore(keys.deadSetIndex, id);
    await waitFor('time to pass', async () => {
      const [seconds, micros] = await redis.time();
      return Number(seconds) * 1000 + Number(micros) / 1000 > Number(score) + 50;
    });
    await expect(deadSet.retry(id)).rejects.toThrow(/is not registered in this application/);
    expect((await deadSet.get(id))?.id).toBe(id);
    // Its score in the index, by Redis' clock (session39-review D1: not its rejectedAt, the rejecting process' clock).
    expect(await redis.zscore(keys.deadSetIndex, id)).toBe(score);
  });
});
