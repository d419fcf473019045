// A Redis server of a test file's own, for what must not touch the shared one: server settings (maxmemory, ACL users),
// MONITOR. Everything the file connects to through test/support/redis.ts (apps, clients, cleanup) goes to it.
import { afterAll } from '@jest/globals';
import { PrivateRedis } from './private-redis.js';

/** Starts the file's server and points `REDIS_URL` at it until the file ends; then the shared one again. */
export async function ownRedisForFile(): Promise<PrivateRedis> {
  const server = await PrivateRedis.start();
  const sharedRedisUrl = process.env.REDIS_URL;
  process.env.REDIS_URL = server.url;
  afterAll(async () => {
    process.env.REDIS_URL = sharedRedisUrl;
    await server.stop();
  });
  return server;
}
