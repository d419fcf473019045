// addBulk on the general path (slot-set locks: lockLimit > 1 here): the entries' slots are asked for together, their
// acquires sent in entry order before any answer is in (one round trip for the bulk instead of one each, in turn), and
// whatever an answer asks next (a stale holder to drop, a slot to take again) is done in entry order, so each entry is
// answered as if the entries before it had been enqueued one by one.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf, expiringKey, owners, queuedKey, removeUnguarded, slotOwners } from '../support/locks.js';
import { redisClient } from '../support/redis.js';
import { socketsOf } from '../support/socket-writes.js';

/** Makes the `nth` acquireLock call (1-based) fail: before it reaches Redis, or after it ran there (reply lost). */
async function failingAcquire<T>(nth: number, ran: boolean, body: () => Promise<T>): Promise<T> {
  const run = RedisScripts.prototype.run;
  let count = 0;
  RedisScripts.prototype.run = function (this: RedisScripts, name, keys, args) {
    if (name !== 'acquireLock' || ++count !== nth) return run.call(this, name, keys, args);
    if (!ran) return Promise.reject(new Error('injected: connection lost before the acquire'));
    return run.call(this, name, keys, args).then(() => {
      throw new Error('injected: reply lost after the acquire ran');
    });
  };
  try {
    return await body();
  } finally {
    RedisScripts.prototype.run = run;
  }
}

/** Runs `body` recording, in order, each `acquireLock` call sent and each answer received. */
async function recordingAcquires<T>(body: () => Promise<T>): Promise<{ value: T; events: string[] }> {
  const events: string[] = [];
  const run = RedisScripts.prototype.run;
  RedisScripts.prototype.run = function (this: RedisScripts, name, keys, args) {
    const answer = run.call(this, name, keys, args);
    if (name !== 'acquireLock') return answer;
    events.push('sent');
    return answer.finally(() => events.push('answered'));
  };
  try {
    return { value: await body(), events };
  } finally {
    RedisScripts.prototype.run = run;
  }
}

describe('addBulk on the general path', () => {
  const { redis, start, onCleanup } = useApps('bulkslots', {
    unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
    paused: true,
  });

  it('sends every entry’s acquire before the first answer, and answers each entry as enqueued in turn', async () => {
    const app = await start();
    const ids = ['a', 'a', 'a', 'b', 'c', 'b'];
    const { value: jobs, events } = await recordingAcquires(() =>
      app.queue.addBulk(ids.map((id, n) => ({ name: 'sync', data: { id, n } }))),
    );
    expect(events).toEqual([...Array<string>(6).fill('sent'), ...Array<string>(6).fill('answered')]);
    // The third 'a' met the two before it (lockLimit 2): a duplicate of the holder whose lease ends first (the two were
    // taken in the same millisecond or so: a tie Redis breaks by id).
    const [a1, a2, a3, b1, c1, b2] = jobs;
    expect([a1.id, a2.id]).toContain(a3.id);
    expect(new Set([a1.id, a2.id, b1.id, c1.id, b2.id]).size).toBe(5);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 5 });
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'a' })))).toEqual(
      [a1.id, a2.id].sort(),
    );
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'b' })))).toEqual(
      [b1.id, b2.id].sort(),
    );
  });

  it('drops stale holders in entry order: two entries take their places, the third is a duplicate of one of them', async () => {
    const app = await start();
    const digest = digestOf(app, 'sync', { id: 's' });
    const key = queuedKey(app.prefix, digest);
    const stale = await app.queue.addBulk([
      { name: 'sync', data: { id: 's', n: 0 } },
      { name: 'sync', data: { id: 's', n: 1 } },
    ]);
    // Both holders' jobs removed behind the library's back, their slots taken long enough ago to be past the grace.
    for (const [i, job] of stale.entries()) {
      await removeUnguarded(app.queue.name, job.id!);
      const score = Number(await redis.zscore(key, job.id!));
      await redis.zadd(key, 'XX', score - 60_000 + i, job.id!);
    }
    const { value: jobs, events } = await recordingAcquires(() =>
      app.queue.addBulk([0, 1, 2].map((n) => ({ name: 'sync', data: { id: 's', n: 10 + n } }))),
    );
    expect(events.slice(0, 3)).toEqual(['sent', 'sent', 'sent']);
    const [first, second, third] = jobs;
    expect(second.id).not.toBe(first.id);
    expect([first.id, second.id]).toContain(third.id);
    for (const job of stale) expect(jobs.map((j) => j.id)).not.toContain(job.id);
    expect(await owners(redis, key)).toEqual([first.id, second.id].sort());
    const waiting = await app.queue.getJobs(['waiting']);
    expect(waiting.map((job: Job) => (job.data as { n: number }).n).sort()).toEqual([10, 11]);
  });

  it('an entry with a producer jobId waits for the entries before it; those after it still meet it in order', async () => {
    const app = await start();
    const jobs = await app.queue.addBulk([
      { name: 'sync', data: { id: 'p', n: 0 } },
      { name: 'sync', data: { id: 'p', n: 1 }, opts: { jobId: 'bulk-p-1' } },
      { name: 'sync', data: { id: 'p', n: 2 } },
      { name: 'sync', data: { id: 'q', n: 3 }, opts: { jobId: 'bulk-q-1' } },
    ]);
    expect(jobs[1].id).toBe('bulk-p-1');
    // A duplicate of one of the two before it (the one whose lease ends first; leases taken in the same millisecond
    // tie, and Redis orders them by id).
    expect([jobs[0].id, 'bulk-p-1']).toContain(jobs[2].id);
    expect(jobs[3].id).toBe('bulk-q-1');
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 3 });
    expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id: 'p' })))).toEqual(
      [jobs[0].id, 'bulk-p-1'].sort(),
    );
  });

  it('an entry that fails gives back every slot the bulk took, those of entries begun after it too', async () => {
    const app = await start({
      unique: [
        { jobName: 'sync', lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
        { jobName: 'fast', lock: 'until_executed', lockArgs: byId },
      ],
    });
    const parent = { id: 'p1', queue: `bull:${app.queue.name}` };
    // The 'fast' entry's lock is BullMQ's deduplication key, which BullMQ refuses on a child: readying it fails after
    // the entries around it sent their acquires.
    const { value: failure, events } = await recordingAcquires(() =>
      app.queue
        .addBulk([
          { name: 'sync', data: { id: 'f1' } },
          { name: 'fast', data: { id: 'f2' }, opts: { parent } },
          { name: 'sync', data: { id: 'f3' } },
        ])
        .then(
          () => undefined,
          (error: unknown) => error,
        ),
    );
    expect(String(failure)).toMatch(/"parent"/);
    expect(events.slice(0, 2)).toEqual(['sent', 'sent']);
    for (const id of ['f1', 'f3'])
      expect(await owners(redis, queuedKey(app.prefix, digestOf(app, 'sync', { id })))).toEqual([]);
    expect(await app.queue.getJobCounts('waiting', 'waiting-children')).toEqual({ waiting: 0, 'waiting-children': 0 });
  });
  const slotsOf = (app: Awaited<ReturnType<typeof start>>, ids: readonly string[]) => slotOwners(redis, app, ids);
  /** An app whose library client is `lib`, one of the test's own (disconnected after it). */
  const appOn = async (lib: Redis) => {
    onCleanup(async () => void lib.disconnect());
    const app = await start({ module: { connection: lib } });
    await app.queue.add('sync', { id: 'warm' });
    return app;
  };

  // Single Redis only: on a Cluster, ioredis leaves a command sent while a destroyed node socket still counts as ready
  // unanswered now and then (seen with and without the corked write; test/locks/write-together.spec.ts has the rest).
  it('a socket destroyed while ioredis still says ready: the acquires go after the reconnect, nothing corked', async () => {
    const lib = redisClient();
    const app = await appOn(lib);
    const before = socketsOf(lib);
    for (const socket of before) socket.destroy();
    const ids = ['d0', 'd1', 'd2', 'd3', 'd4'];
    const jobs = await app.queue.addBulk(ids.map((id) => ({ name: 'sync', data: { id } })));
    for (const socket of [...before, ...socketsOf(lib)]) expect(socket.writableCorked).toBe(0);
    expect(await slotsOf(app, ids)).toEqual(Object.fromEntries(ids.map((id, i) => [id, [jobs[i].id]])));
  });

  it('a client with ioredis auto-pipelining: the same answers', async () => {
    const app = await appOn(redisClient({ enableAutoPipelining: true }));
    const ids = Array.from({ length: 20 }, (_, n) => `ap${n}`);
    const jobs = await app.queue.addBulk(ids.map((id) => ({ name: 'sync', data: { id } })));
    expect(await slotsOf(app, ids)).toEqual(Object.fromEntries(ids.map((id, i) => [id, [jobs[i].id]])));
  });

  it('an entry whose options throw synchronously in begin (a Symbol delay) leaves no slot of the entries before it', async () => {
    const app = await start();
    const failure = await app.queue
      .addBulk([
        { name: 'sync', data: { id: 'y1' } },
        { name: 'sync', data: { id: 'y2' } },
        { name: 'sync', data: { id: 'y3' }, opts: { delay: Symbol('not a delay') as unknown as number } },
      ])
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(Error);
    // queue.add of the same entry alone takes nothing: the bulk gives back what the entries before it took.
    expect(await slotsOf(app, ['y1', 'y2', 'y3'])).toEqual({ y1: [], y2: [], y3: [] });
  });

  // An acquire that ran but whose reply was lost is given back too: a request with a job id of the library's is
  // released whatever its answer was (compare-and-delete on a unique id); left, it would hold one of its digest's two
  // slots until its lease ended.
  it.each([
    ['failed before it reached Redis', false],
    ['ran, its reply lost', true],
  ])('an acquire %s mid-bulk: every slot is given back, nothing is added', async (_label, ran) => {
    const app = await start();
    const ids = ['r1', 'r2', 'r3', 'r4', 'r5'];
    const failure = await failingAcquire(3, ran, () =>
      app.queue.addBulk(ids.map((id) => ({ name: 'sync', data: { id } }))),
    ).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(String(failure)).toMatch(/injected/);
    expect(await slotsOf(app, ids)).toEqual(Object.fromEntries(ids.map((id) => [id, []])));
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 0 });
  });

  it('until_expired: two entries with the same producer jobId answer as sequential queue.add does', async () => {
    const unique = [
      {
        jobName: 'sync',
        lock: 'until_expired' as const,
        lockArgs: byId,
        lockTtl: 60_000,
        onConflict: 'raise' as const,
      },
    ];
    const seq = await start({ unique });
    const first = await seq.queue.add('sync', { id: 'e1' }, { jobId: 'same-id' });
    const second = await seq.queue.add('sync', { id: 'e1' }, { jobId: 'same-id' }); // BullMQ returns the job: no error
    expect(second.id).toBe(first.id);
    const bulkApp = await start({ unique });
    const answer = await bulkApp.queue
      .addBulk([
        { name: 'sync', data: { id: 'e1' }, opts: { jobId: 'same-id' } },
        { name: 'sync', data: { id: 'e1' }, opts: { jobId: 'same-id' } },
      ])
      .then(
        (jobs: Job[]) => jobs.map((j) => j.id),
        (error: unknown) => `threw ${String(error)}`,
      );
    expect(answer).toEqual(['same-id', 'same-id']);
    expect(await owners(redis, expiringKey(bulkApp.prefix, digestOf(bulkApp, 'sync', { id: 'e1' })))).toEqual([
      'same-id',
    ]);
  });

  // BullMQ's addBulk is a pipeline, not a transaction: an entry it refuses leaves the others added.
  it('an entry BullMQ refuses inside its pipeline: the entries it added keep their slots, nothing else is held', async () => {
    const app = await start();
    const wrong = `${app.queue.qualifiedName}:WRONG`;
    await redis.set(wrong, 'not a hash'); // BullMQ's existing-id check reads it as a job hash: WRONGTYPE, that entry only
    try {
      await expect(
        app.queue.addBulk([
          { name: 'sync', data: { id: 'pa', n: 0 } },
          { name: 'sync', data: { id: 'pb', n: 1 }, opts: { jobId: 'WRONG' } },
        ]),
      ).rejects.toThrow();
    } finally {
      await redis.del(wrong);
    }
    const [added] = await app.queue.getJobs(['waiting']);
    expect(added.data).toEqual({ id: 'pa', n: 0 });
    expect(await slotsOf(app, ['pa', 'pb'])).toEqual({ pa: [added.id], pb: [] });
  });

  it('an entry whose parent is missing (BullMQ answers an error code as its id): its slot is given back', async () => {
    const app = await start();
    const parent = { id: 'no-such-parent', queue: app.queue.qualifiedName };
    await expect(app.queue.add('sync', { id: 'mp', n: 0 }, { parent })).rejects.toThrow();
    const [job] = await app.queue.addBulk([{ name: 'sync', data: { id: 'mq', n: 0 }, opts: { parent } }]);
    expect(String(job.id)).toMatch(/^-\d+$/);
    expect(await slotsOf(app, ['mp', 'mq'])).toEqual({ mp: [], mq: [] });
    expect(await app.queue.getJobCounts('waiting', 'waiting-children')).toEqual({ waiting: 0, 'waiting-children': 0 });
  });
});
