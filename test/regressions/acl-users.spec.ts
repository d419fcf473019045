// Found by a hostile review (session 27) against a private Redis with an ACL user restricted as managed services and
// companies restrict an application's user:
// - granted keys but no pub/sub channel (Redis 7's default for a new user, `resetchannels`): a delivery of an
//   idempotency key held by a running job failed — its announcement to the holder (PUBLISH) was refused with NOPERM
//   before it moved to delayed — and so did every retry, while the holder still ran. BullMQ needs no channel. Now the
//   delivery waits all the same (for the holder's lease at most) and the warning names the ACL rule to add;
// - granted BullMQ's keys only (the library's prefix forgotten): the bootstrap and a first job went through, the
//   refusal was logged at debug level, and the first duplicate failed with a bare NOPERM. Now the bootstrap logs an
//   error naming the rule;
// - on a server shared with another application whose queues the user may not read: the orphan reaper looked a
//   general-path lock's owner up in every queue on the server, met NOPERM on the other application's, and kept the
//   orphan forever (counted in `failedKeys`, logged nowhere). A queue only discovered, that the user may not read,
//   now holds none of the owner's jobs.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { UniqueJobsReaper, type IdempotencyJob } from '../../lib/index.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { captureLogger } from '../support/events.js';
import { hold } from '../support/gates.js';
import { byId } from '../support/locks.js';
import { ownRedisForFile } from '../support/own-redis.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { queueEvent, waitFor } from '../support/wait.js';

// ACL users are a server setting: this file gets a server of its own (its default user cleans up after the tests).
const server = await ownRedisForFile();

/** Starts an app whose connections log in as a user with `rules` (ACL SETUSER), on the file's server. */
async function startAs(
  start: (options?: Partial<TestAppOptions>) => Promise<TestApp>,
  user: string,
  rules: string[],
  options: Partial<TestAppOptions>,
): Promise<TestApp> {
  await server.admin.call('ACL', 'SETUSER', user, 'reset', 'on', '>pw', ...rules);
  process.env.REDIS_URL = server.url.replace('redis://', `redis://${user}:pw@`);
  try {
    return await start(options);
  } finally {
    process.env.REDIS_URL = server.url;
  }
}

describe('a Redis user granted no pub/sub channel', () => {
  const { start } = useApps('nochan');

  it('a delivery of a key in progress waits for the holder and replays its result; the warning names the ACL rule', async () => {
    const gate = hold();
    const started = deferred();
    let effects = 0;
    const { logger, lines } = captureLogger();
    const app = await startAs(start, 'nochannels', ['~*', 'resetchannels', '+@all'], {
      module: { logger },
      idempotency: { key: (job: IdempotencyJob<{ id: string }>) => job.data.id, lease: 5_000 },
      worker: { concurrency: 2 },
      handler: async (job: Job<{ id: string }>) => {
        effects++;
        if (job.id === 'first') {
          started.resolve();
          await gate.promise;
        }
        return { charged: job.data.id };
      },
    });
    const first = await app.queue.add('charge', { id: 'evt_1' }, { jobId: 'first' });
    await started.promise;
    // Met the key in progress: moved to delayed (not failed) while the holder runs.
    const delayed = queueEvent(app.queueEvents, 'delayed', 'second');
    const second = await app.queue.add('charge', { id: 'evt_1' }, { jobId: 'second', attempts: 1 });
    await delayed;
    gate.resolve();
    await expect(app.finished(first)).resolves.toEqual({ charged: 'evt_1' });
    await expect(app.finished(second)).resolves.toEqual({ charged: 'evt_1' });
    expect(effects).toBe(1);
    expect(lines.warn.join('\n')).toMatch(/ACL rule "&.*:waiting"/);
  });
});

describe('a Redis user granted BullMQ’s keys only', () => {
  const { start } = useApps('bullonly');

  it('the bootstrap logs an error naming the ACL rule for the library’s keys', async () => {
    const { logger, lines } = captureLogger();
    const app = await startAs(start, 'bullonly', [`~${bullPrefix()}:*`, '&*', '+@all'], {
      module: { logger },
      unique: { lock: 'until_executed', lockArgs: byId },
    });
    const line = await waitFor('the ACL error', () => lines.error.find((text) => text.includes('ACL rule')));
    expect(line).toContain(`"~${app.prefix}:*"`);
  });
});

describe('a Redis user who may not read another application’s queues', () => {
  const { start, onCleanup } = useApps('shared');

  it('the reaper releases a general-path orphan; the unreadable queue holds none of its jobs', async () => {
    const prefix = uniqueName('ujacl');
    const foreignMeta = `${uniqueName('otherapp')}:mail:meta`; // another application's BullMQ queue
    await server.admin.hset(foreignMeta, 'opts.maxLenEvents', '10000');
    onCleanup(async () => void (await server.admin.del(foreignMeta)));
    const app = await startAs(start, 'ownkeys', [`~${bullPrefix()}:*`, `~${prefix}:*`, '&*', '+@all'], {
      module: { prefix, reaper: { interval: false, grace: 0 } },
      unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
      paused: true,
    });
    const result = await app.service.enqueue(app.queue, 'sync', { id: 'o1' });
    if (result.status !== 'enqueued') throw new Error(result.status);
    // Removed behind the library's back: its lock is an orphan.
    await server.admin.del(`${app.queue.qualifiedName}:${result.job.id}`);
    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    expect(report.failedKeys).toBe(0);
    expect(report.reaped.enqueueLocks).toBe(1);
    expect(await server.admin.keys(`${prefix}:*:queued`)).toEqual([]);
  });
});
