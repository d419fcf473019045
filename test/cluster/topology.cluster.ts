// Only in `npm run test:cluster` (jest.cluster.config.mjs): proves that the run really is on a 3-master Redis Cluster,
// and that the library's keys spread over every master while each lock and each idempotency record stays in one slot
// (every script call touches one slot), with BullMQ's keys together in the `{bull}` slot.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { Redis, type Cluster } from 'ioredis';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, runningKey } from '../support/locks.js';
import { bullPrefix, clusterNodes, onCluster, prefixKeys, scanKeys } from '../support/redis.js';
import { InvalidCursorError, LockInspector } from '../../lib/index.js';
import { bullKeys, UniqueJobsKeys } from '../../lib/redis/keys.js';
import { queueApart } from '../../lib/nest/queue-servers.check.js';
import { runCli } from '../cli/run-cli.js';

const JOBS = 30;

describe('on a 3-master Redis Cluster', () => {
  const { redis, start, keysOf } = useApps('cl');
  const cluster = redis as unknown as Cluster;

  /** The slot of each key (`CLUSTER KEYSLOT`). */
  const slots = (keys: readonly string[]) =>
    Promise.all(keys.map(async (key) => Number(await cluster.cluster('KEYSLOT', key))));

  it('the run uses a Cluster client on three masters that serve every slot', async () => {
    expect(onCluster).toBe(true);
    expect(cluster.isCluster).toBe(true);
    await cluster.ping();
    const masters = cluster.nodes('master');
    expect(masters).toHaveLength(3);
    for (const node of masters) {
      const info = await node.cluster('INFO');
      expect(info).toMatch(/cluster_state:ok/);
      expect(info).toMatch(/cluster_slots_ok:16384/);
    }
  });

  it('locks and idempotency records of many jobs spread over every master, each in one slot, and end cleanly', async () => {
    const gate = hold();
    const allStarted = deferred();
    let started = 0;
    const a = await start({
      unique: { lock: 'while_executing', lockArgs: byId },
      idempotency: { key: (job) => (job.data as { id: string }).id },
      worker: { concurrency: JOBS },
      handler: async (job: Job) => {
        if (++started === JOBS) allStarted.resolve();
        await gate.promise;
        return `done:${(job.data as { id: string }).id}`;
      },
    });
    const jobs = await Promise.all(Array.from({ length: JOBS }, (_, i) => a.queue.add('sync', { id: `c${i}` })));
    await allStarted.promise;

    // Every job holds a run-time lock (`{<digest>}`) and an idempotency claim (`{<record id>}`): 2 keys per job.
    const own = await prefixKeys(redis, a.prefix);
    expect(own).toHaveLength(2 * JOBS);
    const running = jobs.map((job) => runningKey(a.prefix, digestOf(a, 'sync', job.data)));
    expect(own).toEqual(expect.arrayContaining(running));
    // …spread over every master (60 keys in random slots: a master with none of them is a 3·(2/3)^60 chance).
    const perMaster = await Promise.all(cluster.nodes('master').map((node) => scanKeys(node, `${a.prefix}:*`)));
    expect(perMaster.map((keys) => keys.length > 0)).toEqual([true, true, true]);
    // Each key's slot is the slot of its hash tag alone, so every key of one lock or record shares it.
    const tags = own.map((key) => /\{[^}]+\}/.exec(key)![0]);
    expect(await slots(own)).toEqual(await slots(tags));
    // BullMQ's keys of the queue all live in the one `{bull}` slot.
    const bullKeys = await scanKeys(redis, `${a.queue.qualifiedName}:*`);
    expect(bullKeys.length).toBeGreaterThan(JOBS);
    expect(new Set(await slots(bullKeys))).toEqual(new Set(await slots([bullPrefix()])));

    // The lock inspector pages over every master, each page's cursor naming the masters it was made over: one without
    // their fingerprint (a single Redis's) is refused rather than read as a place among them.
    const inspector = new LockInspector({ client: cluster, prefix: a.prefix, queues: [] });
    const listed: string[] = [];
    let cursor = '0';
    do {
      const page = await inspector.listLocks({ kind: 'runtime' }, { cursor, limit: 7 });
      listed.push(...page.locks.map((lock) => lock.digest));
      cursor = page.cursor;
      if (cursor === '0') break;
      expect(cursor).toMatch(/^n\d+\.\d+\.\d+(?:-\d+)?\.[0-9a-f]{8}$/);
      await expect(inspector.listLocks({}, { cursor: cursor.replace(/\.[0-9a-f]{8}$/, '') })).rejects.toThrow(
        InvalidCursorError,
      );
    } while (cursor !== '0');
    expect(listed.sort()).toEqual(jobs.map((job) => digestOf(a, 'sync', job.data)).sort());
    // The CLI pointed at one node without --cluster would see that node's locks only: it refuses.
    const [node] = clusterNodes()!;
    const cli = await runCli(['locks', 'list', '--redis', `redis://${node.host}:${node.port}`, '--prefix', a.prefix], {
      connect: false,
    });
    expect([cli.code, cli.stderr]).toEqual([
      1,
      `unique-jobs: redis://${node.host}:${node.port} is a node of a Redis Cluster: run again with --cluster (without it only this node's keys are seen)\n`,
    ]);

    gate.resolve();
    const results: unknown[] = [];
    for (const job of jobs) results.push(await a.finished(job)); // one at a time: each wait adds a Queue listener
    expect(results).toEqual(jobs.map((job) => `done:${(job.data as { id: string }).id}`));
    expect(a.runs).toHaveLength(JOBS);
    // Every run-time lock was released (on whichever master held it); only the completed records remain.
    expect(await keysOf(a)).toEqual(own.filter((key) => key.endsWith(':idempotency')).sort());
  });

  // Review of session 28: `replace` probes that Redis takes writes before it removes a holder; on a Cluster the probe
  // must ask the master its add writes to — the queue's slot, where BullMQ's job and deduplication key go — and the
  // slot-set lock's, not only the latter.
  it("replace's write probes sit in the slots it then writes: the queue's and the slot-set lock's", async () => {
    const a = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 }, paused: true });
    const digest = digestOf(a, 'sync', { id: 'p' });
    const keys = new UniqueJobsKeys(a.prefix);
    const [queueProbe, job, lockProbe, lock] = await slots([
      bullKeys.writeProbe(a.queue.qualifiedName),
      bullKeys.job(a.queue.qualifiedName, 'any'),
      keys.writeProbe(digest),
      keys.enqueueLock(digest),
    ]);
    expect(queueProbe).toBe(job);
    expect(lockProbe).toBe(lock);
  });
  // Session 46 (helper-146): the bootstrap's check of where the queues live gave up on a Cluster client, so a library
  // connection to a single server beside queues on a Cluster (or the reverse) was not even logged, and the library's
  // locks, reaper and checked releases went to the wrong place. One a Cluster client, the other not: told apart.
  it('a library connection that is a single server’s beside queues on a Cluster is named (logged when given)', async () => {
    const [node] = cluster.nodes('master');
    const single = new Redis({ host: node.options.host, port: node.options.port });
    try {
      const queues = [{ name: 'q', getBackend: () => ({ client: Promise.resolve(cluster) }) }];
      const given = await queueApart(single, queues, true);
      expect(given?.fatal).toBe(false);
      expect(given?.error.message).toMatch(/one a Redis Cluster client, the other a single server/);
      expect((await queueApart(single, queues, false))?.fatal).toBe(true);
      // And the library on the Cluster beside a queue on a single server's client.
      const reverse = [{ name: 'q', getBackend: () => ({ client: Promise.resolve(single) }) }];
      expect((await queueApart(cluster, reverse, true))?.error.message).toMatch(/one a Redis Cluster client/);
      // Two Cluster clients are not compared (as before).
      expect(await queueApart(cluster, queues, false)).toBeUndefined();
    } finally {
      await single.quit();
    }
  });
});
