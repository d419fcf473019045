// Session 38: what reads a run-time lock's holders by job id alone, although its owner names its queue. A lock shared
// across queues (`uniqueAcross: 'queues'`, lockLimit 2) can be held at once by two jobs with the same caller id, one in
// each queue. Each case failed before its fix.
import { afterEach, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { AdminLockDetail, UniqueJobOptions } from '../../lib/index.js';
import { expectLocked, lockState } from '../../lib/ops/testing/index.js';
import { OPS, http, useAdminApp } from '../admin/admin-app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold, releaseHeld } from '../support/gates.js';
import { byId, digestOf, owners, runningKey } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';

const across: UniqueJobOptions = {
  lock: 'while_executing',
  lockArgs: byId,
  uniqueAcross: 'queues',
  lockLimit: 2,
  jobName: 'sync',
};

/** A handler that reports each start and waits for the gate (`releaseHeld` opens it after each test). */
function gated() {
  const gate = hold();
  const started: ReturnType<typeof deferred<Job>>[] = [deferred<Job>(), deferred<Job>()];
  let runs = 0;
  const handler = async (job: Job) => {
    started[Math.min(runs++, started.length - 1)].resolve(job);
    await gate.promise;
  };
  return { gate, started, handler };
}

// The admin's lock page grouped owner jobs by id: the second queue's job, holding the same lock under the same id, was
// folded into the first one's and never shown.
describe('session 38: the admin page of a lock held by two jobs with one id, in two queues', () => {
  afterEach(releaseHeld); // before the app's close: jest runs a block's afterEach hooks in the order they are declared
  const admin = useAdminApp();

  it('shows both owner jobs, each in its queue', async () => {
    const [a, b] = [uniqueName('s38-admin-a'), uniqueName('s38-admin-b')];
    const { started, handler } = gated();
    const app = await admin.start({
      queues: [
        { queue: a, unique: across, handler },
        { queue: b, unique: across, handler },
      ],
    });
    const jobId = uniqueName('same-id');
    await app.queue(a).add('sync', { id: 'x' }, { jobId });
    await started[0].promise;
    await app.queue(b).add('sync', { id: 'x' }, { jobId });
    await started[1].promise;

    const [digest] = await http(`${app.adminUrl}/api/locks?kind=runtime`, { headers: { authorization: OPS } }).then(
      (answer) => (answer.json as { locks: { digest: string }[] }).locks.map((lock) => lock.digest),
    );
    const answer = await http(`${app.adminUrl}/api/locks/${digest}`, { headers: { authorization: OPS } });
    expect(answer.status).toBe(200);
    const detail = answer.json as AdminLockDetail;
    expect(detail.locks.flatMap((lock) => lock.owners.map((owner) => [owner.queue, owner.jobId])).sort()).toEqual(
      [
        [a, jobId],
        [b, jobId],
      ].sort(),
    );
    expect(detail.jobs.map((job) => [job.queue, job.id, job.found, job.state]).sort()).toEqual(
      [
        [a, jobId, true, 'active'],
        [b, jobId, true, 'active'],
      ].sort(),
    );
  }, 30_000);
});

// `expectLocked({ holder })` compared job ids alone: a lock held by another queue's job with that id passed for a job
// of the queue asked about.
describe('session 38: expectLocked with a holder, for a lock held by another queue’s job with that id', () => {
  const { start, redis } = useApps('s38-expect');

  it('fails, naming the other queue; passes once this queue’s job holds it too', async () => {
    const { started, handler } = gated();
    const prefix = uniqueName('s38-expect-prefix');
    const a = await start({ unique: across, handler, module: { prefix } });
    const b = await start({ unique: across, handler, module: { prefix } });
    const jobId = uniqueName('same-id');
    await b.queue.add('sync', { id: 'x' }, { jobId });
    await started[0].promise;
    const digest = digestOf(a, 'sync', { id: 'x' });
    expect(digestOf(b, 'sync', { id: 'x' })).toBe(digest);
    expect(await owners(redis, runningKey(prefix, digest))).toEqual([jobId]);

    const state = await lockState(a.moduleRef, a.queue, 'sync', { id: 'x' });
    expect(state.runtime).toEqual({
      key: runningKey(prefix, digest),
      holders: [jobId],
      holderQueues: [expect.stringMatching(/^#[0-9a-f]{12}$/)],
    });
    await expect(
      expectLocked(a.moduleRef, a.queue, 'sync', { id: 'x' }, { kind: 'runtime', holder: jobId }),
    ).rejects.toThrow(`held by job(s) ${jobId} (of queue #`);
    // From the holder's own queue, it is its job.
    await expect(
      expectLocked(b.moduleRef, b.queue, 'sync', { id: 'x' }, { kind: 'runtime', holder: jobId }),
    ).resolves.toMatchObject({ runtime: { holders: [jobId] } });

    await a.queue.add('sync', { id: 'x' }, { jobId });
    await started[1].promise;
    await expect(
      expectLocked(a.moduleRef, a.queue, 'sync', { id: 'x' }, { kind: 'runtime', holder: jobId }),
    ).resolves.toMatchObject({ runtime: { holders: [jobId, jobId] } });
  }, 30_000);
});
