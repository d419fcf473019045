// Session 37, the run-time lock owner naming its queue by a tag (`queueTag`): the reaper, the inspector and the
// idempotency result bound of the same day, looked at once more. Each case failed before its fix.
import { describe, expect, it } from '@jest/globals';
import { LockInspector, type AdminLockDetail } from '../../lib/index.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { OPS, http, useAdminApp } from '../admin/admin-app.js';
import { useApps } from '../support/apps.js';
import { members, runningKey, runtimeOwner } from '../support/locks.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { parkedUnregistered } from '../support/unregistered-queue.js';

// The inspector names a tagged owner's queue among the queues it inspects, then the library's queue registry. A tag
// that names none of them (the registry full at 1,000 queues, or unreadable) was searched for in the inspected queues,
// where its job cannot be (its tag names none of them): a job of another queue numbered like it, the usual case, was
// shown as the holder, in its queue, and the lock was listed under that queue.
describe('session 37: a run-time lock whose owner names a queue neither inspected nor registered', () => {
  const apps = useApps('s37-tag-unknown');
  const { redis, start } = apps;

  it('is not shown held by a job of an inspected queue with the same id', async () => {
    const jobId = uniqueName('same-id');
    const { prefix, b, park } = await parkedUnregistered(apps, jobId);
    const a = await start({ module: { prefix } }); // the inspecting application's queue: no processor
    await a.queue.add('plain', {}, { jobId }); // waiting in A
    const digest = await park();
    expect(await members(redis, runningKey(prefix, digest))).toEqual([runtimeOwner(b, jobId)]);
    expect(await redis.sismember(new UniqueJobsKeys(prefix).queueRegistry, b.queue.qualifiedName)).toBe(0);

    const inspector = new LockInspector({
      client: redis,
      prefix,
      queues: [{ name: a.queue.name, prefix: bullPrefix() }],
    });
    const [lock] = await inspector.showLock(digest);
    expect(lock.queue).toBeUndefined();
    expect(lock.owners).toEqual([expect.objectContaining({ jobId, jobState: 'missing' })]);
    expect(lock.owners[0].queue).toBeUndefined();
    expect((await inspector.listLocks({ queue: a.queue.name })).locks).toEqual([]);
  }, 30_000);
});

// The admin's lock page loads each owner's job: in the queue the inspector found it in, else in every queue the admin
// inspects. A run-time lock owner the inspector shows missing because its tag names no queue it knows was so looked up
// in those queues, and a job of another queue with its id was shown as the lock's owner job (data, logs, history).
describe('session 37: the admin page of a run-time lock whose owner names a queue it does not know', () => {
  const apps = useApps('s37-tag-admin');
  const admin = useAdminApp();

  it('shows its owner job not found, not a job of an inspected queue with the same id', async () => {
    const jobId = uniqueName('same-id');
    const { prefix, park } = await parkedUnregistered(apps, jobId);
    const aName = uniqueName('s37-tag-admin-a');
    const app = await admin.start({ queues: [{ queue: aName }], module: { prefix } });
    await app.queue(aName).add('plain', {}, { jobId });
    const digest = await park();

    const answer = await http(`${app.adminUrl}/api/locks/${digest}`, { headers: { authorization: OPS } });
    expect(answer.status).toBe(200);
    const detail = answer.json as AdminLockDetail;
    expect(detail.locks.map((lock) => lock.owners)).toEqual([[expect.objectContaining({ jobState: 'missing' })]]);
    expect(detail.jobs).toEqual([expect.objectContaining({ id: jobId, found: false })]);
    expect(detail.jobs[0].queue).toBeUndefined();
  }, 30_000);
});
