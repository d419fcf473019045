// Review (helper-158): job data BullMQ accepts but the canonical hash refuses (nested deeper than 1,000 levels) under the
// default fingerprint ('data'): the job fails for good without running, with a message that names the fingerprint and
// the data (it named "Lock arguments") and cuts the path of the value short (it held the whole 1,000-level path).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { useApps } from '../support/apps.js';

describe('a fingerprint that cannot be computed', () => {
  const { start } = useApps('fpdeep');

  it('fails the job for good without running it, naming the fingerprint, the path cut short', async () => {
    const app = await start({
      idempotency: { key: (job: Job<{ id: string }>) => job.data.id },
      handler: async () => 'ran',
    });
    let tree: unknown = { leaf: true };
    for (let i = 0; i < 1200; i++) tree = { child: tree };
    const job = await app.queue.add('deep', { id: 'evt-deep', tree }, { attempts: 3 });
    const error = await app.finished(job).then(
      () => undefined,
      (thrown: unknown) => thrown as Error,
    );
    expect(error?.message).toMatch(
      /^The idempotency fingerprint of job \S+ \(queue "[^"]+"\) cannot be computed: the data it is taken from cannot be hashed canonically at \$\.tree\.child\.child.*…: nested deeper than 1000 arrays and objects \(the job's data, or the fields its `fingerprint` option names; `fingerprint: false` turns the check off\)$/,
    );
    expect(error!.message).not.toContain('Lock arguments');
    expect(error!.message.length).toBeLessThan(600);
    expect(app.runs).toHaveLength(0);
    expect((await app.queue.getJob(job.id!))?.attemptsMade).toBe(1); // for good: no retry
  });
});
