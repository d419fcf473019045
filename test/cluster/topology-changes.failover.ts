// Only in the failover phase (jest.cluster-failover.config.mjs): a 3-master Redis Cluster with a replica each.
// 1. A manual failover (`CLUSTER FAILOVER` on a replica: the master stops taking writes, the replica catches up, then
//    takes its slots) of the masters that hold a running job's run-time lock, its idempotency claim and BullMQ's
//    `{bull}` slot, while the handler runs: what the library holds survives, the worker carries on, nothing is left.
// 2. A forced failover: the master holding a running job's run-time lock is killed (SIGKILL) once its replica has
//    everything it wrote; the cluster promotes the replica after its node timeout, and the same holds. Writes a master
//    had not replicated when it died are lost (Redis replicates asynchronously): documented, not what this checks.
// 3. Slots moving: the slots of a running job's run-time lock and of its idempotency claim are moved to another master
//    the way `redis-cli --cluster reshard` does, each held half-moved (its key on the target, the slot still the
//    source's, which answers ASK) while its lease is renewed; a duplicate delivered meanwhile reaches the lock on the
//    target through ASK and is refused, and a new job runs.
// 4. BullMQ's `{bull}` slot moved while unique jobs are added and run: commands that meet the migrating slot (its keys
//    split, or naming a key the source lacks) get TRYAGAIN and are tried again by ioredis; every job created runs
//    once, one at a time per id, and no lock is left.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Cluster } from 'ioredis';
import { LockInspector, RedisIdempotencyStore } from '../../lib/index.js';
import { encodeCursor, topologyOf } from '../../lib/ops/inspection/page-cursor.js';
import { nodeAddress, scanNodes } from '../../lib/redis/scan.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, digestOf, runningKey, runtimeOwner } from '../support/locks.js';
import { clusterTopology } from '../support/cluster-topology.js';
import { bullPrefix, onCluster } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

describe('failovers and moving slots on a Redis Cluster with replicas', () => {
  const { redis, start, keysOf } = useApps('fo');
  const cluster = redis as unknown as Cluster;
  const { shardOf, failOver, killMasterOf, moveSlotOf, watch, tryAgains } = clusterTopology(cluster);

  /**
   * Starts a worker whose handler holds the job `held` until `release()`, under a `while_executing` run-time lock and a
   * Redis idempotency claim (both with `leaseMs` when given); resolves once the handler runs.
   */
  async function runHeld(leaseMs?: number) {
    const gate = hold();
    const started = deferred<Job>();
    const a = await start({
      // A duplicate waits for the run-time lock as long as the test may take, rather than meet its conflict strategy.
      unique: { lock: 'while_executing', lockArgs: byId, lockTimeout: 60_000, runtimeLockLease: leaseMs },
      idempotency: { key: (job) => (job.data as { id: string }).id, lease: leaseMs },
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
    const store = new RedisIdempotencyStore({ client: cluster, prefix: a.prefix });
    const lock = runningKey(a.prefix, digestOf(a, 'sync', held.data));
    const claim = () => store.get(`${a.queue.name}:sync`, 'held');
    /** The run-time lock held by `held` alone, its claim in progress. */
    const stillHeld = async () => {
      expect(await redis.zrange(lock, '0', '-1')).toEqual([runtimeOwner(a, held.id!)]);
      await expect(claim()).resolves.toMatchObject({ state: 'in_progress' });
    };
    await stillHeld();
    return {
      a,
      held,
      lock,
      record: store.recordKey(`${a.queue.name}:sync`, 'held'),
      claim,
      stillHeld,
      /** A new job runs to its end. */
      async freshRuns(): Promise<void> {
        const fresh = await a.queue.add('sync', { id: 'fresh' });
        await expect(a.finished(fresh)).resolves.toBe('done:fresh');
      },
      /**
       * Lets `held` finish: the duplicate replays its completed record (the effect ran once, and only `held` and the
       * fresh job ran), the lock is gone and only the completed records remain.
       */
      async release(duplicate: Job): Promise<void> {
        gate.resolve();
        await expect(a.finished(held)).resolves.toBe('done:held');
        await expect(a.finished(duplicate)).resolves.toBe('done:held');
        expect(a.runs.map((job) => (job.data as { id: string }).id)).toEqual(['held', 'fresh']);
        expect(await redis.exists(lock)).toBe(0);
        expect((await keysOf(a)).every((key) => key.endsWith(':idempotency'))).toBe(true);
      },
    };
  }

  /**
   * Delivers a duplicate of `held` and resolves once it waits for the run-time lock (active, as long as its
   * lockTimeout), held by `held` alone: the lock itself keeps it off, not only the claim behind it.
   */
  async function duplicateWaiting(run: Awaited<ReturnType<typeof runHeld>>): Promise<Job> {
    const duplicate = await run.a.queue.add('sync', { id: 'held' });
    await waitFor(
      'the duplicate to wait for the lock',
      async () => (await run.a.queue.getJobState(duplicate.id!)) === 'active',
    );
    await run.stillHeld();
    return duplicate;
  }

  /** Resolves once the lease `read` gives (its end, in ms) moved later: renewed, not expired (which reads empty). */
  async function renewed(what: string, read: () => Promise<unknown>): Promise<void> {
    const before = Number(await read());
    expect(before).toBeGreaterThan(0);
    await waitFor(`${what} to be renewed`, async () => Number(await read()) > before);
  }

  it("keeps a running job's run-time lock and claim through the failover of their masters and of BullMQ's", async () => {
    expect(onCluster).toBe(true);
    const run = await runHeld();

    // A lock listing's cursor made before: it names a master by its place among the masters of the moment.
    const inspector = new LockInspector({ client: cluster, prefix: run.a.prefix, queues: [] });
    const masters = () => topologyOf(scanNodes(cluster).map(nodeAddress));
    const before = masters();
    const cursor = encodeCursor({ node: 1, scan: '0', skip: 0 }, before);
    await expect(inspector.listLocks({}, { cursor })).resolves.toBeDefined();

    // Fail over every master the running job depends on (each once: some keys may share one), one after the other.
    const byMaster = new Map<string, string>();
    for (const key of [run.lock, run.record, bullPrefix()]) byMaster.set((await shardOf(key)).master, key);
    for (const key of byMaster.values()) await failOver(key);
    // Another server holds that place now (its SCAN cursor means nothing there), once the client knows it (ioredis
    // learns a new topology when it next refreshes its slots): the cursor is refused, not followed.
    await waitFor('the client to see the new masters', async () => {
      await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
      return masters() !== before;
    });
    await expect(inspector.listLocks({}, { cursor })).rejects.toThrow(/the Cluster's masters changed/);

    // What the library held was replicated before each replica took over: still held, by the same owner.
    await run.stillHeld();
    const duplicate = await duplicateWaiting(run);
    // The worker carries on: a new job runs (once its blocking read on the old master has ended: up to BullMQ's
    // drainDelay, 5 s by default), the duplicate still waiting.
    await run.freshRuns();
    expect(await run.a.queue.getJobState(duplicate.id!)).toBe('active');
    await run.release(duplicate);
  }, 60_000);

  it("keeps a running job's run-time lock and claim when the master holding the lock dies", async () => {
    const run = await runHeld();

    await killMasterOf(run.lock);

    // The promoted replica had every write of the dead master: the lock and the claim are still held.
    await run.stillHeld();
    const duplicate = await duplicateWaiting(run);
    await run.freshRuns();
    await run.release(duplicate);
  }, 90_000);

  it("keeps a running job's run-time lock and claim while their slots move to another master", async () => {
    // Short leases, so that both are renewed while their slots are half moved.
    const run = await runHeld(1_000);
    let duplicate: Job | undefined;

    await moveSlotOf(run.lock, async (target) => {
      await renewed('the run-time lock', () => redis.zscore(run.lock, runtimeOwner(run.a, run.held.id!)));
      // A duplicate delivered now tries the lock on the source, which sends it to the target (ASK): refused there.
      const onTarget = await watch(target, run.lock);
      try {
        duplicate = await run.a.queue.add('sync', { id: 'held' });
        await onTarget.naming(duplicate.id!);
      } finally {
        onTarget.stop();
      }
      expect(await run.a.queue.getJobState(duplicate.id!)).toBe('active');
      await run.stillHeld();
    });
    await moveSlotOf(run.record, async () => {
      await renewed('the idempotency claim', async () => (await run.claim())?.expiresAt);
      await run.freshRuns();
    });

    // Moved, and still held by the same owner.
    await run.stillHeld();
    await run.release(duplicate!);
  }, 90_000);

  it("enqueues and runs unique jobs once while BullMQ's {bull} slot moves to another master under load", async () => {
    // The jobs whose handler started, the ids whose handler is running, and those that ever ran twice at once.
    // Watched in the handler, not from BullMQ's timestamps: a call ioredis sends again after TRYAGAIN carries the time
    // it was first sent.
    const started = new Set<string>();
    const running = new Set<string>();
    const overlapping = new Set<string>();
    const a = await start({
      unique: { lock: 'until_executed', lockArgs: byId },
      // More than the producers below: a second job of an id would find a free slot beside the first.
      worker: { concurrency: 16 },
      handler: async (job: Job) => {
        const { id } = job.data as { id: string };
        started.add(job.id!);
        if (running.has(id)) overlapping.add(id);
        running.add(id);
        // Work that lasts: the duplicate below is added while it runs.
        await new Promise((resolve) => setTimeout(resolve, 50));
        running.delete(id);
      },
    });
    const ids = Array.from({ length: 40 }, (_, i) => `j${i}`);
    const added: Job[] = [];
    let moved = false;
    // Producers (4 at once) add each id, wait for its job to start, and add it again while it runs (until_executed:
    // the duplicate gets the running job, unless it was refused until that job ended), wave after wave until the slot
    // has moved (and at least twice).
    const producing = (async () => {
      for (let wave = 0; !moved || wave < 2; wave++) {
        let next = 0;
        const lane = async () => {
          while (next < ids.length) {
            const id = ids[next++];
            const first = await a.queue.add('sync', { id });
            await waitFor(`job ${first.id} to start`, () => started.has(first.id!));
            added.push(first, await a.queue.add('sync', { id }));
          }
        };
        await Promise.all(Array.from({ length: 4 }, lane));
      }
    })();
    // A few keys at a time, the first batch held (its keys on the target, the others on the source) until a command of
    // BullMQ's met the keys split: Redis refuses it with TRYAGAIN, ioredis tries it again. Jobs are added, taken and
    // finished around the move, and at least one command meets it with the keys split.
    let batches = 0;
    await moveSlotOf(`${bullPrefix()}:${a.queue.name}:meta`, async () => undefined, {
      keysPerMigrate: 3,
      betweenMigrates: async () => {
        if (batches++ > 0) return;
        // Counted from the first batch on (Redis 7 refuses a command naming a key that is missing on the source as
        // soon as the slot is migrating, before any key moved).
        const before = await tryAgains();
        await waitFor('a command to meet the split keys', async () => (await tryAgains()) > before);
      },
    });
    moved = true;
    expect(batches).toBeGreaterThan(3);
    await producing;
    const created = [...new Map(added.map((job) => [job.id!, job])).values()];
    for (const job of created) await a.finished(job);
    // Each job created ran once, and never two of one id at once: a duplicate added while its holder ran got the holder.
    expect(a.runs.map((job) => job.id).sort()).toEqual(created.map((job) => job.id).sort());
    expect([...overlapping]).toEqual([]);
    expect((await keysOf(a)).length).toBe(0);
  }, 90_000);
});
