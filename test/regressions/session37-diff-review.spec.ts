// Session 37, the day's change looked at once more as a whole (run-time lock owners that name their queue by a tag,
// the tools that read them). Each case failed before its fix.
import { describe, expect, it } from '@jest/globals';
import { LockInspector, type AdminLockDetail } from '../../lib/index.js';
import { queueTag } from '../../lib/redis/runtime-lock-owner.js';
import { OPS, http, useAdminApp } from '../admin/admin-app.js';
import { runCli } from '../cli/run-cli.js';
import { useApps } from '../support/apps.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { parkedUnregistered } from '../support/unregistered-queue.js';

// A run-time lock's owner whose tag names a queue the admin neither inspects nor finds in the library's registry is
// shown `missing` (its job cannot be in the inspected queues). The lock page then said of it what it says of an orphan,
// "No job with this id exists in the inspected queues: the lock outlived its job (an orphan). Release it, or let the
// reaper do it", while the job was alive in its own queue, parked between two steps: releasing the lock by hand lets a
// duplicate start between its steps, and the reaper, which finds that queue, keeps it. Nothing in the answer (admin, CLI,
// inspector) said which queue the owner names: the inspector dropped the tag.
describe('session 37 diff review: a live run-time lock owner of a queue the admin does not know', () => {
  const apps = useApps('s37dr-admin');
  const admin = useAdminApp();

  it('is not called an orphan; its queue tag is shown', async () => {
    const jobId = uniqueName('parked');
    const { prefix, b, park } = await parkedUnregistered(apps, jobId);
    const aName = uniqueName('s37dr-admin-a');
    const app = await admin.start({ queues: [{ queue: aName }], module: { prefix } });
    const digest = await park();
    const tag = queueTag(b.queue.qualifiedName);
    expect(await b.queue.getJobState(jobId)).toBe('delayed'); // alive, between its steps

    const page = await http(`${app.adminUrl}/locks/${digest}`, { headers: { authorization: OPS } });
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('orphan');
    expect(page.text).toContain(tag);

    const answer = await http(`${app.adminUrl}/api/locks/${digest}`, { headers: { authorization: OPS } });
    expect(answer.status).toBe(200);
    expect((answer.json as AdminLockDetail).jobs).toEqual([
      expect.objectContaining({ id: jobId, found: false, queueTag: tag }),
    ]);

    const inspector = new LockInspector({
      client: apps.redis,
      prefix,
      queues: [{ name: aName, prefix: bullPrefix() }],
    });
    const [lock] = await inspector.showLock(digest);
    expect(lock.owners).toEqual([expect.objectContaining({ jobId, jobState: 'missing', queueTag: tag })]);
    // The CLI told of another BullMQ prefix: B's queue is not searched.
    const shown = await runCli([
      'locks',
      'show',
      digest,
      '--prefix',
      prefix,
      '--bull-prefix',
      uniqueName('s37dr-none'),
    ]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`tag ${tag}, not searched: its job may be alive there`);
  }, 30_000);
});
