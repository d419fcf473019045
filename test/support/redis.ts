import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';

/** The Redis of this test run (`npm test` sets REDIS_URL; it falls back to the local default). */
export function redisOptions(): { host: string; port: number; password?: string; maxRetriesPerRequest: null } {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    maxRetriesPerRequest: null,
  };
}

/** A plain client for assertions. */
export function redisClient(): Redis {
  return new Redis(redisOptions());
}

/** A name no other test uses (queues, prefixes). */
export function uniqueName(label: string): string {
  return `${label}-${randomUUID().slice(0, 8)}`;
}

/** Every key matching a pattern (SCAN, not KEYS). */
export async function scanKeys(client: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys.sort();
}

/** The lock keys the library holds for a queue and prefix: its own keys and BullMQ deduplication keys. */
export async function lockKeys(client: Redis, prefix: string, queue: string): Promise<string[]> {
  const own = (await scanKeys(client, `${prefix}:*`)).filter((key) => !key.includes(':{dead}:'));
  return [...own, ...(await scanKeys(client, `bull:${queue}:de:*`))];
}
