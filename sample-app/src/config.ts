/**
 * The sample's settings, read once from the environment. Every one has a default, so `node main.js` runs on a machine
 * with Redis on 127.0.0.1:6379 and nothing else.
 */
export const config = {
  /** `api` (the HTTP server and the simulated payment provider) or `worker` (the job processors). */
  role: process.env.ROLE ?? 'api',
  /** HTTP port of the API (`0`: any free port, printed in the ready line). */
  port: Number(process.env.PORT ?? 3000),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  /** PostgreSQL when set; otherwise the SQLite file below (embedded, nothing to install). */
  databaseUrl: process.env.DATABASE_URL,
  sqliteFile: process.env.SQLITE_FILE ?? 'sample-app/data/payments.db',
  /** BullMQ's key prefix, and the prefix of the keys the library writes itself. */
  queuePrefix: process.env.QUEUE_PREFIX ?? 'bull',
  uniqueJobsPrefix: process.env.UNIQUE_JOBS_PREFIX ?? 'sample',
  /** Where the worker reaches the payment provider (default: the simulated one the API serves). */
  providerUrl: process.env.PROVIDER_URL ?? `http://127.0.0.1:${process.env.PORT ?? 3000}/provider`,
  /** How slow the simulated provider answers. */
  providerLatencyMs: Number(process.env.PROVIDER_LATENCY_MS ?? 300),
};

/** Jobs each worker process runs at once, per queue. The PostgreSQL pool is sized from them. */
export const SETTLE_CONCURRENCY = 8;
export const CHARGE_CONCURRENCY = 2;

/** BullMQ connection options from a `redis://[user:password@]host:port[/db]` URL. */
export function redisConnection(url = config.redisUrl) {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    db: Number(parsed.pathname.slice(1) || 0),
    maxRetriesPerRequest: null,
  };
}
