// Only in the failover phase (jest.cluster-failover.config.mjs): a 3-master Redis Cluster with a replica each. A manual
// failover (`CLUSTER FAILOVER` on a replica: the master stops taking writes, the replica catches up, then takes its
// slots) of the masters that hold a running job's run-time lock, its idempotency claim and BullMQ's `{bull}` slot,
// while the handler runs: what the library holds survives, the worker carries on, and nothing is left behind. A forced
// failover (the master dies first) can lose the writes it had not replicated: documented, not tested.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { Redis, type Cluster } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, runningKey } from '../support/locks.js';
import { bullPrefix, onCluster } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('a manual failover on a Redis Cluster with replicas', () => {
  const { redis, start, keysOf } = useApps('fo');
  const cluster = redis as unknown as Cluster;

  /** The master serving `key`'s slot and its replica (none while a failover re-pairs them), as `host:port`. */
  async function shardOf(key: string): Promise<{ master: string; replica: string | undefined }> {
    const slot = Number(await cluster.cluster('KEYSLOT', key));
    const ranges = await cluster.cluster('SLOTS');
    const [, , master, replica] = ranges.find(([first, last]) => slot >= first && slot <= last)!;
    return { master: `${master[0]}:${master[1]}`, replica: replica && `${replica[0]}:${replica[1]}` };
  }

  /** Fails the master of `key` over to its replica; resolves once the cluster says the replica serves the slot. */
  async function failOver(key: string): Promise<void> {
    const { master } = await shardOf(key);
    // The node the cluster client asks may list a replica a moment after the cluster says it is ok.
    const replica = await waitFor(`a replica of ${master}`, async () => (await shardOf(key)).replica);
    const [host, port] = replica.split(':');
    const node = new Redis({ host, port: Number(port), lazyConnect: true });
    try {
      await node.connect();
      expect(await node.cluster('FAILOVER')).toBe('OK');
      await waitFor(`${replica} to take over from ${master}`, async () => (await node.role())[0] === 'master');
      await waitFor(`the cluster to route ${key} to ${replica}`, async () => {
        await new Promise((resolve) => cluster.refreshSlotsCache(resolve));
        return (await shardOf(key)).master === replica;
      });
    } finally {
      node.disconnect();
    }
  }

  it("keeps a running job's run-time lock and claim through the failover of their masters and of BullMQ's", async () => {
    expect(onCluster).toBe(true);
    const gate = hold();
    const started = deferred<Job>();
    const a = await start({
      // A duplicate waits for the run-time lock as long as the test may take, rather than meet its conflict strategy.
      unique: { lock: 'while_executing', lockArgs: byId, lockTimeout: 60_000 },
      idempotency: { key: (job) => (job.data as { id: string }).id },
      worker: { concurrency: 4 },
      handler: async (job: Job) => {
        if ((job.data as { id: string }).id === 'held') {
          started.resolve(job);
          await gate.promise;
        }
        return `done:${(job.data as { id: string }).id}`;
      },
    });
    const held = await a.queue.add('sync', { id: 'held' });
    await started.promise;
    const lock = runningKey(a.prefix, digestOf(a, 'sync', held.data));
    const store = new RedisIdempotencyStore({ client: cluster, prefix: a.prefix });
    const record = store.recordKey(`${a.queue.name}:sync`, 'held');
    expect(await redis.zscore(lock, held.id!)).not.toBeNull();

    // Fail over every master the running job depends on (each once: some keys may share one), one after the other.
    const byMaster = new Map<string, string>();
    for (const key of [lock, record, bullPrefix()]) byMaster.set((await shardOf(key)).master, key);
    for (const key of byMaster.values()) await failOver(key);

    // What the library held was replicated before each replica took over: still held, by the same owner.
    expect(await redis.zscore(lock, held.id!)).not.toBeNull();
    await expect(store.get(`${a.queue.name}:sync`, 'held')).resolves.toMatchObject({ state: 'in_progress' });
    // A duplicate delivered now waits for the run-time lock (active, as long as its lockTimeout), held by the holder
    // alone: the lock itself keeps it off, not only the claim behind it.
    const duplicate = await a.queue.add('sync', { id: 'held' });
    await waitFor(
      'the duplicate to wait for the lock',
      async () => (await a.queue.getJobState(duplicate.id!)) === 'active',
    );
    expect(await redis.zrange(lock, '0', '-1')).toEqual([held.id]);
    // The worker carries on: a new job runs (once its blocking read on the old master has ended: up to BullMQ's
    // drainDelay, 5 s by default).
    const fresh = await a.queue.add('sync', { id: 'fresh' });
    await expect(a.finished(fresh)).resolves.toBe('done:fresh');
    expect(a.runs.map((job) => job.id)).toEqual([held.id, fresh.id]);
    expect(await a.queue.getJobState(duplicate.id!)).toBe('active');

    gate.resolve();
    await expect(a.finished(held)).resolves.toBe('done:held');
    // The duplicate replays the holder's completed record: the effect ran once.
    await expect(a.finished(duplicate)).resolves.toBe('done:held');
    expect(a.runs.map((job) => job.id)).toEqual([held.id, fresh.id]);
    expect(await redis.exists(lock)).toBe(0);
    // Only the completed records remain.
    expect((await keysOf(a)).every((key) => key.endsWith(':idempotency'))).toBe(true);
  }, 60_000);
});
