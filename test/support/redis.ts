import { createHash, randomUUID } from 'node:crypto';
import { relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createIORedisClient, QueueEvents, RedisConnection } from 'bullmq';
import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** The Redis of this test run (`npm test` sets REDIS_URL; it falls back to the local default). */
export function redisOptions(): {
  host: string;
  port: number;
  username?: string;
  password?: string;
  maxRetriesPerRequest: null;
} {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    maxRetriesPerRequest: null,
  };
}

/**
 * The nodes of the Redis Cluster of a cluster run (`npm run test:cluster` sets REDIS_CLUSTER_NODES to
 * `host:port,host:port,…`), or `undefined` on a single Redis.
 */
export function clusterNodes(): { host: string; port: number }[] | undefined {
  const list = process.env.REDIS_CLUSTER_NODES?.trim();
  if (!list) return undefined;
  return list.split(',').map((node) => {
    const [host, port] = node.trim().split(':');
    return { host, port: Number(port) };
  });
}

/** Whether this run is against a Redis Cluster. */
export const onCluster = clusterNodes() !== undefined;

/**
 * A new ioredis Cluster client of the run's cluster. `redisOptions` go to every node connection; those that a Cluster
 * client has of its own (`lazyConnect`, `enableOfflineQueue`) apply to it too.
 */
function newCluster(redisOptions: RedisOptions = {}): Cluster {
  const { host: _host, port: _port, ...rest } = redisOptions;
  const own = {
    ...(rest.lazyConnect !== undefined ? { lazyConnect: rest.lazyConnect } : {}),
    ...(rest.enableOfflineQueue !== undefined ? { enableOfflineQueue: rest.enableOfflineQueue } : {}),
  };
  // `disconnectTimeout`: ioredis' `disconnect()` of a node connection whose socket had already closed (a node the
  // failover phase killed) leaves a 2 s timer that keeps the process up; Jest then reports it did not exit.
  return new Cluster(clusterNodes()!, {
    ...own,
    redisOptions: { maxRetriesPerRequest: null, disconnectTimeout: 200, ...rest },
  });
}

if (onCluster) {
  // BullMQ objects a test builds from plain options (`new QueueEvents(name, bullOptions())`) get a Cluster client of
  // their own, which BullMQ owns and closes, instead of a single-node client that would answer MOVED.
  RedisConnection.clientFactory = (options) => createIORedisClient(newCluster(options as RedisOptions));
}

/**
 * BullMQ's key prefix: `{bull}` on a cluster (a hash tag, so that every key of a queue lives in one slot, as BullMQ's
 * scripts require), BullMQ's default `bull` on a single Redis.
 */
export function bullPrefix(): string {
  return onCluster ? '{bull}' : 'bull';
}

/**
 * Connection and prefix for a BullMQ `Queue`, `Worker` or `QueueEvents` a test builds itself. On a single Redis this is
 * exactly `{ connection: redisOptions() }`; on a cluster it adds the `{bull}` prefix (the connection becomes a Cluster
 * client through BullMQ's client factory, set above).
 */
export function bullOptions(): { connection: ReturnType<typeof redisOptions>; prefix?: string } {
  return onCluster ? { connection: redisOptions(), prefix: bullPrefix() } : { connection: redisOptions() };
}

/**
 * A plain client for assertions (`options` over the run's). On a cluster run this is an ioredis `Cluster`, typed as
 * `Redis` so that tests stay unchanged: the command API is the same, but a command over several keys must keep them in
 * one slot (use {@link deleteKeys} and {@link scanKeys}, which handle that).
 */
export function redisClient(options: RedisOptions = {}): Redis {
  if (onCluster) return newCluster(options) as unknown as Redis;
  return new Redis({ ...redisOptions(), ...options });
}

/**
 * The connection of a Nest app's `BullModule.forRoot`, which the library reuses: the run's options on a single Redis,
 * a Cluster client on a cluster run (BullMQ does not close a client it is given: `closeBullConnection` does).
 */
export function bullConnection(): ReturnType<typeof redisOptions> | Cluster {
  return onCluster ? newCluster() : redisOptions();
}

/** Closes what {@link bullConnection} returned (nothing to do for plain options). */
export async function closeBullConnection(connection: ReturnType<typeof bullConnection>): Promise<void> {
  if (connection instanceof Cluster) await connection.quit();
}

/**
 * `BullModule.forRoot` options of a Nest app: {@link bullConnection} (close it with {@link closeBullConnection} after
 * the app), and on a cluster run the hash-tagged prefix `{bull}` that BullMQ requires there.
 */
export function bullRootOptions(): { connection: ReturnType<typeof bullConnection>; prefix?: string } {
  const connection = bullConnection();
  return onCluster ? { connection, prefix: bullPrefix() } : { connection };
}

/**
 * The id of the newest entry of a queue's event stream (`'0'` when it has none), for `QueueEvents`' `lastEventId`. A
 * `QueueEvents` left to start at `'$'` reads "after whatever is last when its first XREAD reaches Redis", which can be
 * after a test's first jobs already finished: their events then never arrive. On a cluster the first XREAD also waits
 * for a connection to the stream's node, and most runs lost events that way.
 */
export async function lastEventId(queue: { qualifiedName: string }): Promise<string> {
  const client = redisClient();
  try {
    const [newest] = await client.xrevrange(`${queue.qualifiedName}:events`, '+', '-', 'COUNT', 1);
    return newest?.[0] ?? '0';
  } finally {
    await client.quit();
  }
}

/** A ready `QueueEvents` of a queue that receives every event from now on (see {@link lastEventId}). */
export async function openQueueEvents(queueName: string): Promise<QueueEvents> {
  const qualifiedName = `${bullPrefix()}:${queueName}`;
  const events = new QueueEvents(queueName, { ...bullOptions(), lastEventId: await lastEventId({ qualifiedName }) });
  await events.waitUntilReady();
  return events;
}

/**
 * The tag of this test run: `UNIQUE_JOBS_RUN_TAG` (scripts/test.mjs sets 6 hex digits per run), else one of this
 * process's own. Every {@link uniqueName} carries it, so that the end of the run finds the keys the run left in a shared
 * Redis (`<label>-<run tag><file tag><random>`) without ever looking at another client's keys.
 */
export const runTag: string = /^[0-9a-f]{6}$/.test(process.env.UNIQUE_JOBS_RUN_TAG ?? '')
  ? process.env.UNIQUE_JOBS_RUN_TAG!
  : randomUUID().replace(/-/g, '').slice(0, 6);

/**
 * 4 hex digits that name a test file: the first of sha1 of its path relative to the repository (`test/module.spec.ts`),
 * as scripts/leftover-keys.mjs computes them to say which file left a key. `ffff` outside jest (a fixture process).
 */
export function fileTag(relativePath: string | undefined): string {
  if (!relativePath) return 'ffff';
  return createHash('sha1').update(relativePath.split(sep).join('/')).digest('hex').slice(0, 4);
}

let thisFileTag: string | undefined;

/** The {@link fileTag} of the test file that loaded this module (jest's `expect.getState().testPath`). */
function currentFileTag(): string {
  if (thisFileTag === undefined) {
    const expectGlobal = (globalThis as { expect?: { getState?: () => { testPath?: string } } }).expect;
    const testPath = expectGlobal?.getState?.().testPath;
    thisFileTag = fileTag(testPath ? relative(fileURLToPath(new URL('../..', import.meta.url)), testPath) : undefined);
  }
  return thisFileTag;
}

/**
 * A name no other test uses (queues, prefixes): `<label>-<run tag><file tag><8 random hex>` (18 hex digits after the
 * dash), see {@link runTag}.
 */
export function uniqueName(label: string): string {
  return `${label}-${runTag}${currentFileTag()}${randomUUID().slice(0, 8)}`;
}

/** Every key matching a pattern (SCAN, not KEYS); on a cluster, the keys of every master. */
export async function scanKeys(client: Redis | Cluster, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  // A Cluster client knows its masters once connected: a PING waits for that.
  if (client instanceof Cluster) await client.ping();
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
  }
  return keys.sort();
}

/**
 * Deletes keys: in batches of 500 on a single Redis; one key per DEL on a cluster, where the keys of a prefix spread
 * over slots and a multi-key DEL across slots fails with CROSSSLOT.
 */
export async function deleteKeys(client: Redis | Cluster, keys: readonly string[]): Promise<void> {
  if (client instanceof Cluster) {
    for (let i = 0; i < keys.length; i += 100) await Promise.all(keys.slice(i, i + 100).map((key) => client.del(key)));
    return;
  }
  for (let i = 0; i < keys.length; i += 500) await client.del(...keys.slice(i, i + 500));
}

/**
 * Deletes what a test left in Redis under names it made: every BullMQ key of `queues` (`bull:<queue>:*`, `{bull}:…` on
 * a cluster) and every key under `prefixes` (`<prefix>:*`: the library's locks, dead set, idempotency records, or a
 * test's own probe keys). Call it once the apps, workers and fixture processes that write there have stopped.
 */
export async function deleteNamespaces(
  client: Redis | Cluster,
  { queues = [], prefixes = [] }: { queues?: readonly string[]; prefixes?: readonly string[] },
): Promise<void> {
  const patterns = [...queues.map((queue) => `${bullPrefix()}:${queue}:*`), ...prefixes.map((prefix) => `${prefix}:*`)];
  for (const pattern of patterns) await deleteKeys(client, await scanKeys(client, pattern));
}

/**
 * The library's keys under a prefix, but for the registry of the queues it guards (`<prefix>:{queues}:known`,
 * written once when an app guards a queue).
 */
export async function prefixKeys(client: Redis | Cluster, prefix: string): Promise<string[]> {
  return (await scanKeys(client, `${prefix}:*`)).filter((key) => !key.endsWith(':{queues}:known'));
}

/** The lock keys the library holds for a queue and prefix: its own keys and BullMQ deduplication keys. */
export async function lockKeys(client: Redis, prefix: string, queue: string): Promise<string[]> {
  // Not the dead set, nor the few-second marks of which `replace` call reports a job it removed.
  const own = (await prefixKeys(client, prefix)).filter(
    (key) => !key.includes(':{dead}:') && !key.endsWith(':removed'),
  );
  return [...own, ...(await scanKeys(client, `${bullPrefix()}:${queue}:de:*`))];
}
