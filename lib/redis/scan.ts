import type { Cluster, Redis } from 'ioredis';
import { bullKeys } from './keys.js';

/**
 * The nodes a key-space SCAN must visit: the client itself, or every master of a Redis Cluster, in a stable order (so
 * a cursor over them stays valid). The library's and BullMQ's keys spread over every master of a cluster.
 */
export function scanNodes(client: Redis | Cluster): Redis[] {
  if (!client.isCluster) return [client as Redis];
  return (client as Cluster).nodes('master').sort((a, b) => nodeAddress(a).localeCompare(nodeAddress(b), 'en'));
}

/** A node's address as the client knows it (`host:port`). */
export function nodeAddress(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

/** {@link scanNodes}, connecting a lazy Cluster client first (before it connects it knows no masters). */
export async function connectedScanNodes(client: Redis | Cluster): Promise<Redis[]> {
  if (client.isCluster && scanNodes(client).length === 0) await client.ping();
  return scanNodes(client);
}

export { escapeGlob } from './keys.js';

/**
 * The BullMQ queues under a key prefix (see {@link discoverQueueNames}), sorted by name. A MATCH narrower than `*:meta`
 * would cost the same: SCAN visits every key either way.
 */
export async function discoverQueues(
  client: Redis | Cluster,
  prefix = 'bull',
  count = 1000,
): Promise<{ name: string; prefix: string }[]> {
  return queuesUnderPrefix(await discoverQueueNames(client, count), prefix);
}

/** The queues among qualified names (`<prefix>:<queue>`) that live under a BullMQ prefix (queue names hold no `:`). */
export function queuesUnderPrefix(
  qualifiedNames: readonly string[],
  prefix: string,
): { name: string; prefix: string }[] {
  const start = `${prefix}:`;
  return qualifiedNames
    .filter((qualified) => qualified.startsWith(start))
    .map((qualified) => qualified.slice(start.length))
    .filter((name) => name !== '' && !name.includes(':'))
    .map((name) => ({ name, prefix }));
}

/**
 * Every BullMQ queue on the server, whatever its prefix: the qualified names (`<prefix>:<queue>`) of the keys that end
 * in `:meta`, on every node, in steps of `count` keys. A key of another application that happens to end in `:meta`
 * only adds a name whose job keys do not exist.
 */
export async function discoverQueueNames(client: Redis | Cluster, count = 1000): Promise<string[]> {
  const names = new Set<string>();
  for (const node of await connectedScanNodes(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', bullKeys.metaPattern, 'COUNT', count);
      cursor = next;
      for (const key of keys) names.add(bullKeys.queueOfMeta(key));
    } while (cursor !== '0');
  }
  return [...names].sort();
}
