// Review (session 36, processes): the library's promises across several worker processes of one queue.
// - A duplicate of a step job's key delivered while the job is parked between two steps (no process holds the key)
//   announces itself; the process that resumes the job's last step later than PENDING_MS (2 s) after that has forgotten
//   the announcement, so when it completes the record nobody woke the duplicate: it waited a whole lease after the job
//   completed (60 s here, 30 s by default). The worker processes are test/fixtures/step-worker.ts.
import { afterAll, afterEach, describe, expect, it, jest } from '@jest/globals';
import { Queue } from 'bullmq';
import { spawnFixture } from '../support/fixtures.js';
import { Leftovers } from '../support/leftovers.js';
import { pgPool } from '../support/postgres.js';
import { bullOptions, openQueueEvents, redisClient, uniqueName } from '../support/redis.js';

jest.setTimeout(120_000);

describe('session 36 review, worker processes', () => {
  const redis = redisClient();
  const pool = pgPool(1);
  const leftovers = new Leftovers(redis, pool);
  afterEach(async () => leftovers.cleanUp());
  afterAll(async () => {
    await pool.end();
    await redis.quit();
  });

  it('a duplicate that met a step job parked longer than 2 s between steps runs when the job completes, not a lease later', async () => {
    const LEASE = 60_000;
    const queueName = uniqueName('s36p-step');
    const prefix = uniqueName('s36p-step-ns');
    const probe = uniqueName('s36p-step-probe');
    leftovers.namespaces.push(prefix, probe);
    // Two worker processes of the queue; the step job waits 5 s between its steps (longer than the 2 s for which a
    // process keeps an announcement of a key it does not hold).
    const workers = ['A', 'B'].map((label) =>
      spawnFixture('step-worker', {
        QUEUE: queueName,
        PREFIX: prefix,
        PROBE: probe,
        LABEL: label,
        STEP_DELAY: '5000',
        IDEMPOTENCY: '1',
        LEASE: String(LEASE),
      }),
    );
    leftovers.fixtures.push(...workers);
    await Promise.all(workers.map((worker) => worker.waitFor((message) => message.ready === true)));
    const queue = new Queue(queueName, bullOptions());
    leftovers.queues.push(queue);
    const events = await openQueueEvents(queueName);
    leftovers.queueEvents.push(events);
    const delayed = (jobId: string) =>
      new Promise<void>((resolve) => {
        const on = (event: { jobId: string }) => {
          if (event.jobId !== jobId) return;
          events.off('delayed', on);
          resolve();
        };
        events.on('delayed', on);
      });

    const parked = delayed('step-job');
    const job = await queue.add('step', { key: 'K' }, { jobId: 'step-job' });
    await parked; // step 1 ran and handed the key over to the job's next delivery
    const duplicateIds = ['dup-1', 'dup-2', 'dup-3'];
    const waiting = Promise.all(duplicateIds.map(delayed));
    const duplicates = await queue.addBulk(
      duplicateIds.map((jobId) => ({ name: 'step', data: { key: 'K' }, opts: { jobId } })),
    );
    await waiting; // each met the parked record and waits (announced)

    const result: unknown = await job.waitUntilFinished(events);
    const completedAt = Date.now();
    // A deadline (not a sleep): without the fix they come back only when their lease-long delay ends.
    let deadline: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      deadline = setTimeout(() => resolve('still waiting'), LEASE / 4);
    });
    const replays = await Promise.race([
      Promise.all(duplicates.map((duplicate) => duplicate.waitUntilFinished(events))),
      late,
    ]);
    clearTimeout(deadline);
    expect(replays).toEqual([result, result, result]);
    expect(Date.now() - completedAt).toBeLessThan(LEASE / 4);
    // Each step's effect once: the duplicates replayed the job's result.
    expect(await redis.mget(`${probe}:effect:K:1`, `${probe}:effect:K:2`)).toEqual(['1', '1']);
    const started = await redis.lrange(`${probe}:started`, 0, -1);
    expect(started.map((run) => run.split(':').slice(1).join(':'))).toEqual(['step-job:1', 'step-job:2']);
  });
});
