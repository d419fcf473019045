// A Redis of the test file's own with ACL users: BullMQ's connections and the library's logging in as different users,
// a password rotated under a running app, and a logger to await what the library says of it.
import type { UniqueJobsModuleOptions } from '../../lib/index.js';
import { deferred, type Deferred } from './deferred.js';
import type { TestApp, TestAppOptions } from './app.js';
import type { PrivateRedis } from './private-redis.js';

/** What a file running apps against `server`'s ACL users needs. */
export function aclUsers(server: PrivateRedis) {
  /** Creates (or resets) an ACL user with every key, channel and command, and `password`. */
  const user = async (name: string, password: string): Promise<void> => {
    await server.admin.call('ACL', 'SETUSER', name, 'reset', 'on', `>${password}`, '~*', '&*', '+@all');
  };
  /** Runs `body` with BullMQ's connections (REDIS_URL) logging in as `name`. */
  const bullAs = async <T>(name: string, password: string, body: () => Promise<T>): Promise<T> => {
    process.env.REDIS_URL = server.url.replace('redis://', `redis://${name}:${password}@`);
    try {
      return await body();
    } finally {
      process.env.REDIS_URL = server.url;
    }
  };
  /** The library's own connection, to the server, as `username`. */
  const libraryConnection = (username: string, password: string): UniqueJobsModuleOptions['connection'] => ({
    host: '127.0.0.1',
    port: server.port,
    username,
    password,
  });
  return {
    user,
    libraryConnection,
    /** Rotates `name`'s password (to one nobody has) and drops its connections: they log in again, refused. */
    async rotate(name: string): Promise<void> {
      await server.admin.call('ACL', 'SETUSER', name, 'resetpass', '>rotated');
      await server.admin.call('CLIENT', 'KILL', 'USER', name);
    },
    /**
     * Starts an app whose BullMQ logs in as user `app` and whose library connection as user `lib` (both created here,
     * password `pw`), with a watched logger.
     */
    async startSplit(start: (options: Partial<TestAppOptions>) => Promise<TestApp>, options: Partial<TestAppOptions>) {
      await user('app', 'pw');
      await user('lib', 'pw');
      const watched = watchedLogger();
      const module = { ...options.module, logger: watched.logger, connection: libraryConnection('lib', 'pw') };
      const app = await bullAs('app', 'pw', () => start({ ...options, module }));
      return { app, watched };
    },
  };
}

/** A logger that keeps every line and resolves `next(pattern)` at the first line (written from then on) matching it. */
function watchedLogger() {
  const lines: string[] = [];
  const waiting: { pattern: RegExp; seen: Deferred<string> }[] = [];
  const add = (message: unknown) => {
    const line = String(message);
    lines.push(line);
    for (const waiter of waiting.filter(({ pattern }) => pattern.test(line))) {
      waiting.splice(waiting.indexOf(waiter), 1);
      waiter.seen.resolve(line);
    }
  };
  return {
    lines,
    logger: { log: add, warn: add, error: add },
    next(pattern: RegExp): Promise<string> {
      const seen = deferred<string>();
      waiting.push({ pattern, seen });
      return seen.promise;
    },
  };
}
