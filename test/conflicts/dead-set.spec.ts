import { describe, expect, it } from '@jest/globals';
import { TruncatedDeadSetEntryError } from '../../lib/index.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { useApps } from '../support/apps.js';
import { asDuplicate, asEnqueued, dedupHolder } from '../support/locks.js';
import { Queue } from 'bullmq';
import { bullOptions, bullPrefix, scanKeys, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { clientSide } from './helpers.js';

type Data = { id: string; n: number; tag?: string };

describe('dead set (client-side reject, until_executed)', () => {
  const { redis, start, keysOf, onCleanup } = useApps('dead', clientSide('reject'));

  it('list (newest first), get, delete and size', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'a', n: 0 });
    const one = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    const two = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 }));

    expect(await app.service.deadSet.size()).toBe(2);
    const listed = await app.service.deadSet.list();
    expect(listed.map((entry) => entry.id)).toEqual([two.deadSetEntryId, one.deadSetEntryId]);
    expect(listed.map((entry) => (entry.data as Data).n)).toEqual([2, 1]);
    expect(await app.service.deadSet.list({ offset: 1, limit: 1 })).toEqual([listed[1]]);
    expect(await app.service.deadSet.get(one.deadSetEntryId!)).toEqual(listed[1]);
    expect(await app.service.deadSet.get('no-such-entry')).toBeUndefined();

    await expect(app.service.deadSet.delete(one.deadSetEntryId!)).resolves.toBe(true);
    expect(await app.service.deadSet.get(one.deadSetEntryId!)).toBeUndefined();
    expect(await app.service.deadSet.size()).toBe(1);
    expect((await app.service.deadSet.list()).map((entry) => entry.id)).toEqual([two.deadSetEntryId]);
    await expect(app.service.deadSet.delete(one.deadSetEntryId!)).resolves.toBe(false);
    await expect(app.service.deadSet.retry(one.deadSetEntryId!)).resolves.toBeUndefined();

    // Deleting touches neither the queue nor the lock.
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    expect(await keysOf(app)).toHaveLength(1);
    await expect(app.service.deadSet.delete(two.deadSetEntryId!)).resolves.toBe(true);
    expect(await app.service.deadSet.size()).toBe(0);
    expect(await scanKeys(redis, `${app.prefix}:{dead}:*`)).toEqual([]);
  });

  it('a retry that never ends (its process died mid-retry) loses no entry: it is back once its claim ends', async () => {
    const app = await start();
    const holder = await app.queue.add('job', { id: 'a', n: 0 });
    const entry = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    const id = entry.deadSetEntryId!;
    const [before] = await app.service.deadSet.list();
    const keys = new UniqueJobsKeys(app.prefix);
    const setKeys = [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes, keys.deadSetClaims];
    // What a retry does first, with a short claim, and then nothing (its process is gone, its claim not renewed).
    const bounds = [10_000, 0, Number.MAX_SAFE_INTEGER, 60_000];
    const claimed = (await new RedisScripts(redis).run('deadSetClaim', setKeys, [
      id,
      200,
      ...bounds,
      'gone',
    ])) as string[];
    expect(JSON.parse(claimed[0])).toMatchObject({ id, data: { n: 1 } });
    expect(await app.service.deadSet.size()).toBe(0); // out of the dead set while claimed: no second retry takes it
    expect(await app.service.deadSet.bytes()).toBe(0);
    await expect(app.service.deadSet.retry(id)).resolves.toBeUndefined();
    // Any read of the dead set puts it back once the claim ended (get here: the CLI's retry and delete read it first).
    await waitFor('the entry back in the dead set', () => app.service.deadSet.get(id));
    expect(await app.service.deadSet.list()).toEqual([before]); // as it was, as old as it was
    expect(await app.service.deadSet.bytes()).toBe(Buffer.byteLength(JSON.stringify(before)));
    expect(await redis.exists(keys.deadSetClaims)).toBe(0);
    for (const key of [keys.deadSetIndex, keys.deadSetEntries]) expect(await redis.pttl(key)).toBeGreaterThan(60_000);
    await holder.remove(); // its digest free: the retry enqueues
    await expect(app.service.deadSet.retry(id)).resolves.toMatchObject({ status: 'enqueued' });
    expect(await app.service.deadSet.size()).toBe(0);
    expect(await scanKeys(redis, `${app.prefix}:{dead}:*`)).toEqual([]);
  });

  it('an entry whose stored value is not an entry (damaged, or written by something else) is listed, not retried, deleted', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'a', n: 0 });
    const real = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    const entries = `${app.prefix}:{dead}:entries`;
    const index = `${app.prefix}:{dead}:index`;
    const now = Date.now();
    // Written behind the library's back, in one slot ({dead}): not JSON, and JSON that is no entry.
    await redis.hset(entries, 'bad-text', 'not json', 'bad-shape', '{"x":1}');
    await redis.zadd(index, now + 1, 'bad-text', now + 2, 'bad-shape');

    const listed = await app.service.deadSet.list();
    expect(listed.map((entry) => entry.id)).toEqual(['bad-shape', 'bad-text', real.deadSetEntryId]);
    expect(listed[0]).toMatchObject({
      truncated: true,
      reason: expect.stringMatching(/^Unreadable dead-set entry \(not a dead-set entry\)/),
    });
    expect(listed[1]).toMatchObject({
      truncated: true,
      originalBytes: 8,
      reason: expect.stringMatching(/^Unreadable dead-set entry \(not JSON: /),
    });
    expect((listed[2].data as Data).n).toBe(1);
    expect(await app.service.deadSet.get('bad-text')).toEqual(listed[1]);
    await expect(app.service.deadSet.retry('bad-text')).rejects.toThrow(TruncatedDeadSetEntryError);
    expect(await app.service.deadSet.size()).toBe(3);
    await expect(app.service.deadSet.delete('bad-text')).resolves.toBe(true);
    await expect(app.service.deadSet.delete('bad-shape')).resolves.toBe(true);
    expect((await app.service.deadSet.list()).map((entry) => entry.id)).toEqual([real.deadSetEntryId]);
    await expect(app.service.deadSet.delete(real.deadSetEntryId!)).resolves.toBe(true);
    expect(await scanKeys(redis, `${app.prefix}:{dead}:*`)).toEqual([]);
  });

  it('retry while the lock is still held is another duplicate: the entry is replaced by a new one', async () => {
    const app = await start();
    const holder = await app.queue.add('job', { id: 'a', n: 0 });
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }, { attempts: 4 }));
    const original = (await app.service.deadSet.get(dup.deadSetEntryId!))!;

    const retried = asDuplicate((await app.service.deadSet.retry(dup.deadSetEntryId!))!);
    expect(retried).toMatchObject({ strategy: 'reject', existingJobId: holder.id, digest: dup.digest });
    expect(retried.deadSetEntryId).toEqual(expect.any(String));
    expect(retried.deadSetEntryId).not.toBe(dup.deadSetEntryId);
    expect(await app.service.deadSet.get(dup.deadSetEntryId!)).toBeUndefined();
    const replacement = await app.service.deadSet.get(retried.deadSetEntryId!);
    expect(replacement).toMatchObject({
      data: original.data,
      opts: original.opts,
      digest: original.digest,
      existingJobId: holder.id,
      side: 'client',
    });
    expect(await app.service.deadSet.size()).toBe(1);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    expect(await dedupHolder(redis, app.queue.name, dup.digest)).toBe(holder.id);
  });

  it('retry after the lock was released enqueues the job (payload and options) and removes the entry', async () => {
    const app = await start();
    const holder = await app.queue.add('job', { id: 'a', n: 0 });
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }, { attempts: 4 }));
    app.start();
    await app.finished(holder);
    expect(await keysOf(app)).toEqual([]);

    const retried = asEnqueued((await app.service.deadSet.retry(dup.deadSetEntryId!))!);
    expect(retried.job.data).toEqual({ id: 'a', n: 1 });
    expect(retried.job.opts.attempts).toBe(4);
    expect(retried.digest).toBe(dup.digest);
    expect(await app.service.deadSet.size()).toBe(0);
    expect(await app.service.deadSet.get(dup.deadSetEntryId!)).toBeUndefined();
    await app.finished(retried.job);
    expect(app.runs.map((job) => (job.data as Data).n)).toEqual([0, 1]);
    expect(await keysOf(app)).toEqual([]);
  });

  it('retry goes to the queue the duplicate was rejected in, not to a queue of the same name under another BullMQ prefix', async () => {
    const app = await start();
    const holder = asEnqueued(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 0 }));
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    expect(await app.service.deadSet.get(dup.deadSetEntryId!)).toMatchObject({
      queue: app.queue.name,
      bullPrefix: bullPrefix(),
    });
    // Guarded after the app's own: the latest guarded queue of the name, which a retry by name alone picked.
    const other = app.service.guardQueue(
      new Queue(app.queue.name, { ...bullOptions(), prefix: `{${uniqueName('tenant')}}` }),
    );
    onCleanup(async () => {
      await other.obliterate({ force: true });
      await other.close();
    });
    await app.queue.remove(holder.job.id!);
    await waitFor('the lock to go', async () => (await keysOf(app)).length === 0);

    const retried = asEnqueued((await app.service.deadSet.retry(dup.deadSetEntryId!))!);
    expect(retried.job.queueQualifiedName).toBe(app.queue.qualifiedName);
    expect((await app.queue.getJob(retried.job.id!))?.data).toEqual({ id: 'a', n: 1 });
    expect(await other.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 0 });
    await app.queue.remove(retried.job.id!);
  });

  it('an entry whose queue is not guarded under its prefix is not retried, and stays', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'a', n: 0 });
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    const stored = (await app.service.deadSet.get(dup.deadSetEntryId!))!;
    // As kept by the same application under another BullMQ prefix (another environment on the same library prefix).
    await redis.hset(
      `${app.prefix}:{dead}:entries`,
      dup.deadSetEntryId!,
      JSON.stringify({ ...stored, bullPrefix: 'staging' }),
    );
    await expect(app.service.deadSet.retry(dup.deadSetEntryId!)).rejects.toThrow(
      `queue "${app.queue.name}" under BullMQ prefix "staging" is not registered in this application`,
    );
    expect(await app.service.deadSet.get(dup.deadSetEntryId!)).toMatchObject({ bullPrefix: 'staging' });
  });

  it('a retried entry takes the lock: a duplicate of it is rejected in turn', async () => {
    const app = await start();
    const holder = asEnqueued(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 0 }));
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    // Free the lock without running anything: remove the holder (its deduplication key goes with it).
    await app.queue.remove(holder.job.id!);
    await waitFor('the lock to go', async () => (await keysOf(app)).length === 0);

    const retried = asEnqueued((await app.service.deadSet.retry(dup.deadSetEntryId!))!);
    expect(await dedupHolder(redis, app.queue.name, dup.digest)).toBe(retried.job.id);
    const next = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 }));
    expect(next.existingJobId).toBe(retried.job.id);
    expect((await app.service.deadSet.list()).map((entry) => (entry.data as Data).n)).toEqual([2]);
  });

  it('stays bounded by maxSize: the oldest entries are dropped', async () => {
    const app = await start({ module: { deadSet: { maxSize: 3 } } });
    await app.queue.add('job', { id: 'a', n: 0 });
    const ids: string[] = [];
    for (let n = 1; n <= 5; n++) {
      ids.push(asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n })).deadSetEntryId!);
    }
    expect(await app.service.deadSet.size()).toBe(3);
    const listed = await app.service.deadSet.list();
    expect(listed.map((entry) => (entry.data as Data).n)).toEqual([5, 4, 3]);
    expect(listed.map((entry) => entry.id)).toEqual([ids[4], ids[3], ids[2]]);
    expect(await app.service.deadSet.get(ids[0])).toBeUndefined();
    expect(await app.service.deadSet.get(ids[1])).toBeUndefined();
    expect(await redis.hlen(`${app.prefix}:{dead}:entries`)).toBe(3);
  });

  it('stays bounded by maxAge: entries older than it are dropped when the set changes', async () => {
    const app = await start({ module: { deadSet: { maxAge: 200 } } });
    await app.queue.add('job', { id: 'a', n: 0 });
    const old = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 })).deadSetEntryId!;
    let n = 2;
    let latest = '';
    let latestAt = 0;
    await waitFor('the old entry to age out', async () => {
      latestAt = Date.now();
      latest = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: n++ })).deadSetEntryId!;
      return (await app.service.deadSet.get(old)) === undefined;
    });
    // The latest entry is kept, unless it aged out too meanwhile (a slow machine: 200 ms between two calls).
    const kept = await app.service.deadSet.get(latest);
    if (kept === undefined) expect(Date.now() - latestAt).toBeGreaterThanOrEqual(200);
    expect(
      (await app.service.deadSet.list({ limit: 1000 })).every((entry) => Date.now() - entry.rejectedAt < 5000),
    ).toBe(true);
  });
});
