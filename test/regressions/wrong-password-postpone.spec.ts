// Found by review 86: a job postponed because Redis refused the login of the library's connection (a rotated
// password) before its handler ran must keep its enqueue lock while it waits in delayed. An `until_executed` job under
// a Redis @IdempotencyKey, with no attempts left, met the refusal at its claim: the failed attempt's hook asked BullMQ,
// heard "fails for good" and released the enqueue lock ahead of the end (on the worker's connection, which logs in);
// then the job was put back in delayed instead, unlocked, and a duplicate of its digest was admitted beside it. Now
// the job is put back where the claim failed, so the hook sees a job moved (it runs again) and keeps the lock. On a
// Redis of the file's own (ACL users).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { UniqueJobOptions, UniqueJobsModuleOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { byId, dedupHolder, digestOf, owners, queuedKey } from '../support/locks.js';
import { ownRedisForFile } from '../support/own-redis.js';
import { waitFor } from '../support/wait.js';

const server = await ownRedisForFile();

/** Creates (or resets) an ACL user with every key, channel and command, and `password`. */
async function aclUser(user: string, password: string): Promise<void> {
  await server.admin.call('ACL', 'SETUSER', user, 'reset', 'on', `>${password}`, '~*', '&*', '+@all');
}

/** Runs `body` with BullMQ's connections (REDIS_URL) logging in as `user`. */
async function bullAs<T>(user: string, password: string, body: () => Promise<T>): Promise<T> {
  process.env.REDIS_URL = server.url.replace('redis://', `redis://${user}:${password}@`);
  try {
    return await body();
  } finally {
    process.env.REDIS_URL = server.url;
  }
}

/** A logger resolving `next(pattern)` at the first line (written from then on) matching it. */
function watchedLogger() {
  const waiting: { pattern: RegExp; seen: () => void }[] = [];
  const add = (message: unknown) => {
    for (const waiter of waiting.filter(({ pattern }) => pattern.test(String(message)))) {
      waiting.splice(waiting.indexOf(waiter), 1);
      waiter.seen();
    }
  };
  return {
    logger: { log: add, warn: add, error: add },
    next(pattern: RegExp): Promise<void> {
      const seen = deferred<void>();
      waiting.push({ pattern, seen: () => seen.resolve() });
      return seen.promise;
    },
  };
}

describe('until_executed under a Redis @IdempotencyKey, its claim refused by the library login', () => {
  const { start, redis } = useApps('wrongpwpp');

  it.each<[string, Partial<UniqueJobOptions>]>([
    ['fast path with lockTtl', { lockTtl: 60_000 }],
    ['slot set (lockLimit 2)', { lockLimit: 2 }],
  ])('%s: postponed with no attempts left, it keeps its enqueue lock while it waits', async (_label, path) => {
    await aclUser('app', 'pw');
    await aclUser('lib', 'pw');
    const watched = watchedLogger();
    const connection: UniqueJobsModuleOptions['connection'] = {
      host: '127.0.0.1',
      port: server.port,
      username: 'lib',
      password: 'pw',
    };
    const app = await bullAs('app', 'pw', () =>
      start({
        module: { logger: watched.logger, connection },
        unique: { lock: 'until_executed', lockArgs: byId, ...path },
        idempotency: { key: (job: Job) => (job.data as { id: string }).id },
        handler: async (job: Job<{ id: string }>) => job.data.id,
      }),
    );
    // Two jobs first: the library learns the worker's connection, then that it reaches the library's own server (a
    // release at a job's end is then sent there, where the login is accepted).
    for (const id of ['warm1', 'warm2'])
      await expect(app.finished(await app.queue.add('sync', { id }))).resolves.toBe(id);
    await app.worker!.pause();
    const job = await app.queue.add('sync', { id: 'refused' }, { attempts: 1 });
    const digest = digestOf(app, 'sync', { id: 'refused' });
    const holders = async () =>
      path.lockLimit
        ? await owners(redis, queuedKey(app.prefix, digest))
        : [await dedupHolder(redis, app.queue.name, digest)];
    expect(await holders()).toEqual([job.id]);

    const refused = watched.next(/WRONGPASS/);
    await server.admin.call('ACL', 'SETUSER', 'lib', 'resetpass', '>rotated');
    await server.admin.call('CLIENT', 'KILL', 'USER', 'lib');
    await refused;
    const postponed = new Promise<void>((resolve) =>
      app.queueEvents.on('delayed', ({ jobId }) => jobId === job.id && resolve()),
    );
    void app.worker!.resume();
    await postponed;
    expect(await job.getState()).toBe('delayed');
    expect(await holders()).toEqual([job.id]); // still its own while it waits

    const accepted = watched.next(/accepts the login of the library's connection again/);
    await server.admin.call('ACL', 'SETUSER', 'lib', '>pw');
    await accepted;
    await expect(app.finished(job)).resolves.toBe('refused');
    expect(app.runs.map((run) => (run.data as { id: string }).id)).toEqual(['warm1', 'warm2', 'refused']);
    await waitFor('its lock to be released', async () => (await holders()).every((holder) => holder === null));
  });
});
