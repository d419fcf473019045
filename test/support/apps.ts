import { afterAll, afterEach } from '@jest/globals';
import type { Redis } from 'ioredis';
import { startApp, type TestApp, type TestAppOptions } from './app.js';
import { releaseHeld } from './gates.js';
import { lockKeys, redisClient, uniqueName } from './redis.js';

export interface Apps {
  /** A plain client for assertions, quit after the file. */
  redis: Redis;
  /** Starts an app on a fresh queue (`options` over the file's defaults); it is closed after the test. */
  start(options?: Partial<TestAppOptions>): Promise<TestApp>;
  /** The lock keys the library holds for an app (`lockKeys` of its prefix and queue). */
  keysOf(app: TestApp): Promise<string[]>;
  /** Runs `cleanup` after the test, before the apps close (e.g. closing a worker the test made). */
  onCleanup(cleanup: () => Promise<void>): void;
}

/**
 * The app lifecycle of a test file: after each test, lets held handlers go (`hold()`, `Gates`), runs the cleanups and
 * closes the apps the test started; after the file, quits the Redis client. Call once, at the top of a `describe`.
 */
export function useApps(label: string, defaults: Omit<Partial<TestAppOptions>, 'queue'> = {}): Apps {
  // Lazily connected: run with `-t`, a describe block whose tests are all filtered out runs no hook (afterAll included),
  // and a client connected here would keep Jest from exiting.
  const redis = redisClient({ lazyConnect: true });
  const apps: TestApp[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    releaseHeld();
    for (const cleanup of cleanups.splice(0)) await cleanup();
    for (const app of apps.splice(0)) await app.close();
  });
  afterAll(async () => {
    await redis.quit();
  });
  return {
    redis,
    start: async (options = {}) => {
      const app = await startApp({ queue: uniqueName(label), ...defaults, ...options });
      apps.push(app);
      return app;
    },
    keysOf: (app) => lockKeys(redis, app.prefix, app.queue.name),
    onCleanup: (cleanup) => void cleanups.push(cleanup),
  };
}
