// The topology moves of the failover phase's tests, on the Cluster client `cluster` they share: which master serves a
// key, a manual failover, a killed master, a slot moved as `redis-cli --cluster reshard` does, and what nodes see.
import { expect } from '@jest/globals';
import { Redis, type Cluster } from 'ioredis';
import { waitFor } from './wait.js';

/** The topology helpers bound to `cluster`. */
export function clusterTopology(cluster: Cluster) {
  /** The master serving `key`'s slot and its replica (none while a failover re-pairs them), as `host:port`. */
  async function shardOf(key: string): Promise<{ master: string; replica: string | undefined }> {
    const slot = Number(await cluster.cluster('KEYSLOT', key));
    // A node may list a slot a moment after the cluster says ok (a clean clone's first test met a SLOTS answer
    // without it): asked again until it does.
    const [, , master, replica] = await waitFor(`a node to list slot ${slot}`, async () =>
      (await cluster.cluster('SLOTS')).find(([first, last]) => slot >= first && slot <= last),
    );
    return { master: `${master[0]}:${master[1]}`, replica: replica && `${replica[0]}:${replica[1]}` };
  }

  /** Resolves once the cluster client routes `key` to the master at `address` (its slot map refreshed). */
  async function routedTo(key: string, address: string): Promise<void> {
    await waitFor(`the cluster to route ${key} to ${address}`, async () => {
      await new Promise((resolve) => cluster.refreshSlotsCache(resolve));
      return (await shardOf(key)).master === address;
    });
  }

  /** The master serving `key` and its replica, once listed: a node may list it a moment after the cluster is ok. */
  async function pairOf(key: string): Promise<{ master: string; replica: string }> {
    const { master } = await shardOf(key);
    return { master, replica: await waitFor(`a replica of ${master}`, async () => (await shardOf(key)).replica) };
  }

  /** Fails the master of `key` over to its replica; resolves once the cluster says the replica serves the slot. */
  async function failOver(key: string): Promise<void> {
    const { master, replica } = await pairOf(key);
    await withNodes([replica], async ([node]) => {
      expect(await node.cluster('FAILOVER')).toBe('OK');
      await waitFor(`${replica} to take over from ${master}`, async () => (await node.role())[0] === 'master');
      await routedTo(key, replica);
    });
  }

  /** A connection to one node, `host:port`. */
  async function nodeAt(address: string): Promise<Redis> {
    const [host, port] = address.split(':');
    // disconnectTimeout: as in test/support/redis.ts (the killed node's socket is closed before `disconnect()`).
    const node = new Redis({
      host,
      port: Number(port),
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      disconnectTimeout: 200,
    });
    node.on('error', () => undefined); // the killed node's connection ends
    await node.connect();
    return node;
  }

  /** Runs `work` with a connection to each node of `addresses`, closed afterwards whatever happens. */
  async function withNodes<T>(addresses: string[], work: (nodes: Redis[]) => Promise<T>): Promise<T> {
    const nodes: Redis[] = [];
    try {
      for (const address of addresses) nodes.push(await nodeAt(address));
      return await work(nodes);
    } finally {
      for (const node of nodes) node.disconnect();
    }
  }

  /** A field of a node's `INFO replication`. */
  async function replicationField(node: Redis, field: string): Promise<string | undefined> {
    return new RegExp(`^${field}:(.*)\\r?$`, 'm').exec(await node.info('replication'))?.[1]?.trim();
  }

  /**
   * Kills the master serving `key` (SIGKILL: it gets no chance to hand anything over) once its replica acknowledged
   * every write it had made, then resolves when the cluster, after its node timeout, routes `key` to the promoted
   * replica.
   */
  async function killMasterOf(key: string): Promise<void> {
    const { master, replica } = await pairOf(key);
    await withNodes([master, replica], async ([masterNode, replicaNode]) => {
      // Everything the master wrote so far reached its replica: what the test then expects to survive is there.
      const written = Number(await replicationField(masterNode, 'master_repl_offset'));
      await waitFor(`${replica} to catch up with ${master}`, async () => {
        const acknowledged = /offset=(\d+)/.exec((await replicationField(masterNode, 'slave0')) ?? '')?.[1];
        return Number(acknowledged) >= written;
      });
      const pid = Number(/^process_id:(\d+)/m.exec(await masterNode.info('server'))![1]);
      process.kill(pid, 'SIGKILL');
      await waitFor(`${replica} to be promoted`, async () => (await replicaNode.role())[0] === 'master', 30_000);
      await routedTo(key, replica);
    });
  }

  /** The cluster's masters, as `host:port`. */
  async function masters(): Promise<string[]> {
    const ranges = await cluster.cluster('SLOTS');
    return [...new Set(ranges.map(([, , master]) => `${master[0]}:${master[1]}`))];
  }

  /**
   * Moves `key`'s slot to another master as `redis-cli --cluster reshard` does (importing on the target, migrating on
   * the source, `MIGRATE` of its keys, then the slot assigned to the target on every master), and runs `halfMoved`
   * (given the target's address) between the last two steps: the keys are on the target, the source still owns the
   * slot and answers ASK. `keysPerMigrate` keys move at a time, `betweenMigrates` runs after each batch (its keys
   * split between the two nodes meanwhile: multi-key commands get TRYAGAIN).
   */
  async function moveSlotOf(
    key: string,
    halfMoved: (target: string) => Promise<void>,
    { keysPerMigrate = 100, betweenMigrates = async () => undefined } = {},
  ): Promise<void> {
    const slot = Number(await cluster.cluster('KEYSLOT', key));
    const from = (await shardOf(key)).master;
    const to = (await masters()).find((address) => address !== from)!;
    await withNodes([from, to], async ([source, target]) => {
      const [sourceId, targetId] = [
        String(await source.call('CLUSTER', 'MYID')),
        String(await target.call('CLUSTER', 'MYID')),
      ];
      await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId);
      await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId);
      const [host, port] = to.split(':');
      for (;;) {
        const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', slot, keysPerMigrate)) as string[];
        if (keys.length === 0) break;
        await source.call('MIGRATE', host, port, '', 0, 5_000, 'KEYS', ...keys);
        await betweenMigrates();
      }
      // Half moved: the source answers ASK for the key, the target holds it.
      await expect(source.exists(key)).rejects.toThrow(/^ASK /);
      await target.call('ASKING');
      expect(await target.exists(key)).toBe(1);
      await halfMoved(to);
      await target.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
      await source.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
      const others = (await masters()).filter((m) => m !== to && m !== from);
      await withNodes(others, async (nodes) => {
        for (const node of nodes) await node.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
      });
      await routedTo(key, to);
    });
  }

  /** Watches (MONITOR) the commands `address` receives that name `key`: `naming(text)` resolves at the first naming it. */
  async function watch(address: string, key: string) {
    const node = await nodeAt(address);
    const monitor = await node.monitor();
    const seen: string[][] = [];
    const waiting: { text: string; resolve: () => void }[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (!args.includes(key)) return;
      seen.push(args);
      for (const w of waiting) if (args.includes(w.text)) w.resolve();
    });
    return {
      naming: (text: string) =>
        new Promise<void>((resolve, reject) => {
          if (seen.some((args) => args.includes(text))) return resolve();
          const timer = setTimeout(() => reject(new Error(`${address} got no command naming ${text}`)), 15_000);
          waiting.push({ text, resolve: () => (clearTimeout(timer), resolve()) });
        }),
      stop: () => {
        monitor.disconnect();
        node.disconnect();
      },
    };
  }

  /** How many commands the masters refused with TRYAGAIN so far (INFO errorstats), all together. */
  async function tryAgains(): Promise<number> {
    return withNodes(await masters(), async (nodes) => {
      let count = 0;
      for (const node of nodes) {
        count += Number(/^errorstat_TRYAGAIN:count=(\d+)/m.exec(await node.info('errorstats'))?.[1] ?? 0);
      }
      return count;
    });
  }

  return { shardOf, failOver, killMasterOf, masters, moveSlotOf, watch, tryAgains };
}
