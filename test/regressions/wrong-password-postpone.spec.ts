// Found by review 86: a job postponed because Redis refused the login of the library's connection (a rotated
// password) before its handler ran must keep its enqueue lock while it waits in delayed. An `until_executed` job under
// a Redis @IdempotencyKey, with no attempts left, met the refusal at its claim: the failed attempt's hook asked BullMQ,
// heard "fails for good" and released the enqueue lock ahead of the end (on the worker's connection, which logs in);
// then the job was put back in delayed instead, unlocked, and a duplicate of its digest was admitted beside it. Now
// the job is put back where the claim failed, so the hook sees a job moved (it runs again) and keeps the lock. On a
// Redis of the file's own (ACL users). And an error that only reads like a refused login (a user's key function or
// strategy quoting WRONGPASS / NOAUTH) while Redis accepts the library's login fails the job as any error does.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { ConflictStrategy, UniqueJobOptions } from '../../lib/index.js';
import { serverSide } from '../conflicts/helpers.js';
import { Gates } from '../support/gates.js';
import { useApps } from '../support/apps.js';
import { aclUsers } from '../support/acl-users.js';
import { byId, dedupHolder, digestOf, owners, queuedKey } from '../support/locks.js';
import { ownRedisForFile } from '../support/own-redis.js';
import { waitFor } from '../support/wait.js';

const server = await ownRedisForFile();

const { user: aclUser, libraryConnection, rotate, startSplit } = aclUsers(server);

describe('until_executed under a Redis @IdempotencyKey, its claim refused by the library login', () => {
  const { start, redis } = useApps('wrongpwpp');

  it.each<[string, Partial<UniqueJobOptions>]>([
    ['fast path with lockTtl', { lockTtl: 60_000 }],
    ['slot set (lockLimit 2)', { lockLimit: 2 }],
  ])('%s: postponed with no attempts left, it keeps its enqueue lock while it waits', async (_label, path) => {
    const { app, watched } = await startSplit(start, {
      unique: { lock: 'until_executed', lockArgs: byId, ...path },
      idempotency: { key: (job: Job) => (job.data as { id: string }).id },
      handler: async (job: Job<{ id: string }>) => job.data.id,
    });
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
    await rotate('lib');
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

describe('an error that only reads like a refused login', () => {
  const { start } = useApps('wrongpwpp');

  it('thrown by the @IdempotencyKey key function while Redis accepts the login: the job fails as it should', async () => {
    await aclUser('lib', 'pw');
    const app = await start({
      module: { connection: libraryConnection('lib', 'pw') },
      unique: { lock: 'while_executing', lockArgs: byId },
      idempotency: {
        key: () => {
          throw new Error('WRONGPASS from the customer database the key is read from');
        },
      },
    });
    const job = await app.queue.add('sync', { id: 'k' }, { attempts: 1 });
    await expect(app.finished(job)).rejects.toThrow(/WRONGPASS/);
    expect(await job.getState()).toBe('failed');
    expect(app.runs).toHaveLength(0);
  });

  it('thrown by a custom server strategy while Redis accepts the login: the job fails as it should', async () => {
    const throwing: ConflictStrategy = {
      name: 'throwing',
      sides: ['server'],
      onServerConflict: () => Promise.reject(new Error('NOAUTH from an audit service the strategy calls')),
    };
    const gates = new Gates().hold('a');
    const app = await start({ ...serverSide('throwing', gates), module: { strategies: [throwing] } });
    const first = await app.queue.add('sync', { id: 's', tag: 'a' });
    await gates.started('a');
    const copy = await app.queue.add('sync', { id: 's', tag: 'b' }, { attempts: 1 });
    await expect(app.finished(copy)).rejects.toThrow(/NOAUTH/);
    expect(await copy.getState()).toBe('failed');
    gates.release('a');
    await app.finished(first);
  });
});
