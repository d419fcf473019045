// Where the app meets Redis: REDIS_URL (default 127.0.0.1:6379), and key prefixes holding FIXTURE_TOKEN, so that the
// test can find and delete every key the app created.
const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const token = process.env.FIXTURE_TOKEN ?? 'pack-fixture';

export const connection = {
  host: url.hostname,
  port: Number(url.port || 6379),
  ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
};
export const bullPrefix = `${token}-bull`;
export const uniqueJobsPrefix = `${token}-uj`;
