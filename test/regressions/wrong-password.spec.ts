// Found by a review: the library's own Redis connection (forRoot "connection") logging in with a wrong password, or as
// a user that does not exist, while BullMQ's connections log in fine. The bootstrap succeeded and the library logged
// "Redis host:port: WRONGPASS …" two or three times, then nothing: a unique job whose lock rides in BullMQ's add was
// enqueued and ran; one on the general path (until_expired, lockLimit > 1) or a `reject` duplicate failed with a bare
// ReplyError; a while_executing or @IdempotencyKey job was enqueued and failed in the worker; the dead set, the reaper
// and the queue registry never worked. Now the bootstrap fails with RedisLoginRefusedError naming the option, the user
// and Redis' answer, and a login refused after the start (a rotated password) fails every enqueue of a unique job at
// once with it, having sent nothing, until Redis accepts the login again; a job whose start in the worker meets the
// refusal goes back to delayed, its attempts untouched. On a Redis of the file's own (ACL users).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { RedisLoginRefusedError, UniqueJobsError, type UniqueJobsModuleOptions } from '../../lib/index.js';
import { processorClass } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { bootstrapError } from '../support/bootstrap.js';
import { aclUsers } from '../support/acl-users.js';
import { byId } from '../support/locks.js';
import { ownRedisForFile } from '../support/own-redis.js';
import { redisClient, uniqueName } from '../support/redis.js';

const server = await ownRedisForFile();

const { user: aclUser, libraryConnection, rotate, startSplit } = aclUsers(server);

/**
 * The bootstrap error of an app whose BullMQ logs in as `app` with `bullPassword` and whose library connection is
 * `connection` (else BullMQ's).
 */
function bootWith(
  connection: UniqueJobsModuleOptions['connection'] | undefined,
  bullPassword = 'pw',
  module: Partial<UniqueJobsModuleOptions> = {},
): Promise<unknown> {
  const queue = uniqueName('wrongpw');
  const processor = processorClass({ queue, unique: { lock: 'until_executed', lockArgs: byId }, paused: true }, []);
  return bootstrapError({
    queues: [queue],
    providers: [processor],
    module: { ...module, ...(connection ? { connection } : {}) },
    // Lazy: it connects once the app listens to it (else ioredis prints a refusal no one listened to yet).
    connection: redisClient({ username: 'app', password: bullPassword, lazyConnect: true }),
  });
}

describe('a library connection whose login Redis refuses at bootstrap', () => {
  it.each([
    ['a wrong password', 'app', 'wrong'],
    ['a user that does not exist', 'nobody', 'pw'],
  ])(
    '%s fails the bootstrap with RedisLoginRefusedError naming the option, the user and WRONGPASS',
    async (_, user, password) => {
      await aclUser('app', 'pw');
      const error = await bootWith(libraryConnection(user, password));
      expect(error).toBeInstanceOf(RedisLoginRefusedError);
      expect(error).toBeInstanceOf(UniqueJobsError);
      const refused = error as RedisLoginRefusedError;
      expect(refused.user).toBe(user);
      expect(refused.reply).toMatch(/^WRONGPASS/);
      expect(refused.connection).toBe(`127.0.0.1:${server.port}`);
      expect(refused.message).toContain('UniqueJobsModule.forRoot "connection"');
      expect(refused.message).toContain(`as user "${user}"`);
      expect(refused.message).toContain('the application does not start');
    },
  );

  it('the default connection (BullModule.forRoot’s) refused: the message says where it comes from', async () => {
    await aclUser('app', 'pw');
    const error = await bootWith(undefined, 'stale');
    expect(error).toBeInstanceOf(RedisLoginRefusedError);
    expect((error as Error).message).toContain(
      'UniqueJobsModule.forRoot "connection" not given: BullModule.forRoot\'s connection',
    );
  });
});

// Review of session 28: `enabled: false` turns the library off (jobs pass straight through): its connection's login
// is not its to check then.
it('enabled: false: a refused login of the library connection does not stop the application', async () => {
  await aclUser('app', 'pw');
  expect(await bootWith(libraryConnection('app', 'wrong'), 'pw', { enabled: false })).toBeUndefined();
});

describe('a library connection whose login Redis refuses after the start', () => {
  const { start } = useApps('wrongpw');

  it('every enqueue of a unique job fails at once with RedisLoginRefusedError, sending nothing, until Redis accepts the login again', async () => {
    const { app, watched } = await startSplit(start, {
      module: { enqueueTimeout: 30_000 },
      unique: { lock: 'until_executed', lockArgs: byId },
      handler: async (job: Job<{ id: string }>) => job.data.id,
    });
    await expect(app.finished(await app.queue.add('sync', { id: 'before' }))).resolves.toBe('before');

    // The password is rotated and the library's connection dropped: it logs in again with the old one.
    const refusedLine = watched.next(/WRONGPASS/);
    await rotate('lib');
    const line = await refusedLine;
    expect(line).toContain('UniqueJobsModule.forRoot "connection"');
    expect(line).toContain('as user "lib"');
    expect(line).toMatch(/WRONGPASS/);

    const started = Date.now();
    const error = await app.queue.add('sync', { id: 'during' }, { jobId: 'during' }).catch((e: unknown) => e);
    const waited = Date.now() - started;
    expect(error).toBeInstanceOf(RedisLoginRefusedError);
    expect((error as Error).message).toContain('the enqueue sent nothing');
    expect(waited).toBeLessThan(5_000); // at once, not after enqueueTimeout (30 s)
    await expect(app.service.enqueue(app.queue, 'sync', { id: 'explicit' })).rejects.toBeInstanceOf(
      RedisLoginRefusedError,
    );
    expect(await app.queue.getJob('during')).toBeUndefined();
    // ioredis tries again every 2 s at most: the refusal is logged once, not once per attempt.
    expect(watched.lines.filter((text) => /WRONGPASS/.test(text))).toHaveLength(1);

    const accepted = watched.next(/accepts the login of the library's connection again/);
    await server.admin.call('ACL', 'SETUSER', 'lib', '>pw');
    await accepted;
    await expect(app.finished(await app.queue.add('sync', { id: 'after' }))).resolves.toBe('after');
  });
});

describe('a job whose library connection is refused its login when a worker starts it', () => {
  const { start } = useApps('wrongpw');
  const cases = [
    { name: 'while_executing', unique: { lock: 'while_executing' as const, lockArgs: byId } },
    { name: 'until_and_while_executing', unique: { lock: 'until_and_while_executing' as const, lockArgs: byId } },
    { name: '@IdempotencyKey, Redis store', idempotency: { key: (job: Job) => (job.data as { id: string }).id } },
  ];

  it.each(cases)(
    '$name: goes back to delayed, its attempts untouched, and runs once Redis accepts the login again',
    async ({ unique, idempotency }) => {
      const { app, watched } = await startSplit(start, {
        unique,
        idempotency,
        paused: true,
        handler: async (job: Job<{ id: string }>) => job.data.id,
      });
      const job = await app.queue.add('sync', { id: 'refused' }, { attempts: 2, backoff: 1 });

      const refusedLine = watched.next(/WRONGPASS/);
      await rotate('lib');
      await refusedLine;
      const postponed = new Promise<void>((resolve) =>
        app.queueEvents.on('delayed', ({ jobId }) => jobId === job.id && resolve()),
      );
      app.start();
      await postponed;
      const [delay, attemptsMade, failedReason] = await server.admin.hmget(
        `${app.queue.qualifiedName}:${job.id}`,
        'delay',
        'atm',
        'failedReason',
      );
      expect(await job.getState()).toBe('delayed');
      expect(Number(delay)).toBeGreaterThan(0);
      expect(attemptsMade ?? '0').toBe('0'); // no attempt spent on the refused login
      expect(failedReason).toBeNull();
      expect(app.runs).toHaveLength(0);

      const accepted = watched.next(/accepts the login of the library's connection again/);
      await server.admin.call('ACL', 'SETUSER', 'lib', '>pw');
      await accepted;
      await expect(app.finished(job)).resolves.toBe('refused');
      expect(app.runs).toHaveLength(1);
    },
  );
});
