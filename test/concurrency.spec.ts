// Multi-process proof: several OS processes (fixtures in test/fixtures, compiled by `npm test` into .build/) race for
// the same digests through one Redis. Each producer is a producer-only Nest application (forRoot jobs); each worker a
// Nest application with a while_executing processor.
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { defineUniqueJob, digest, lockKey } from '../lib/index.js';
import type { ProducerSummary } from './fixtures/concurrency-producer.js';
import type { RunRecord } from './fixtures/concurrency-worker.js';
import { startApp, type TestApp } from './support/app.js';
import { killFixturesAndWait, spawnFixture } from './support/fixtures.js';
import { lockKeys, redisClient, redisOptions, scanKeys, uniqueName } from './support/redis.js';

/** Runs producers to the end: waits until every one is ready, says "go" to all at once, collects the summaries. */
async function runProducers(envs: Record<string, string>[]): Promise<ProducerSummary[]> {
  const producers = envs.map((env) => spawnFixture('concurrency-producer', env));
  await Promise.all(producers.map((p) => p.waitFor((m) => m.ready === true)));
  for (const p of producers) p.child.stdin.end('go\n');
  const summaries = await Promise.all(producers.map((p) => p.waitFor((m) => 'summary' in m)));
  const exits = await Promise.all(producers.map((p) => p.exited));
  for (const exit of exits) expect(exit).toMatchObject({ code: 0, signal: null });
  return summaries.map((m) => m.summary as ProducerSummary);
}

/** Sums per-digest counters over the producers. */
function total(summaries: ProducerSummary[], field: 'locked' | 'duplicates', key: string): number {
  return summaries.reduce((sum, s) => sum + (s[field][key] ?? 0), 0);
}

describe('many processes, one Redis', () => {
  const redis = redisClient();
  const queues: Queue[] = [];
  const prefixes: string[] = [];
  let app: TestApp | undefined;
  const openQueue = (name: string) => {
    const queue = new Queue(name, { connection: redisOptions() });
    queues.push(queue);
    return queue;
  };

  afterEach(async () => {
    await killFixturesAndWait(); // gone before their keys are deleted: a fixture still running would write them again
    await app?.close();
    app = undefined;
    for (const queue of queues.splice(0)) {
      await queue.obliterate({ force: true });
      await queue.close();
    }
    for (const prefix of prefixes.splice(0)) {
      const keys = await scanKeys(redis, `${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
    }
  });
  afterAll(async () => redis.quit());

  it('deduplication path: 4 producers × 250 adds over 10 event ids create exactly one job per event id', async () => {
    const queueName = uniqueName('conc');
    const prefix = uniqueName('ujc');
    prefixes.push(prefix);
    const queue = openQueue(queueName);
    const eventIds = Array.from({ length: 10 }, (_, i) => `evt_${i}`);
    const summaries = await runProducers(
      Array.from({ length: 4 }, () => ({
        QUEUES: queueName,
        PREFIX: prefix,
        COUNT: '250',
        EVENT_IDS: eventIds.join(','),
        IN_FLIGHT: '10',
      })),
    );

    expect(summaries.map((s) => s.errors)).toEqual([[], [], [], []]);
    expect(summaries.map((s) => s.adds)).toEqual([250, 250, 250, 250]);
    expect(new Set(summaries.map((s) => s.pid)).size).toBe(4);

    // exactly one job per event id in the queue
    expect(await queue.getJobCounts('wait', 'delayed', 'prioritized', 'active')).toEqual({
      wait: 10,
      delayed: 0,
      prioritized: 0,
      active: 0,
    });
    const jobs = await queue.getJobs(['wait'], 0, -1);
    expect(jobs.map((job) => (job.data as { eventId: string }).eventId).sort()).toEqual([...eventIds].sort());

    for (const job of jobs) {
      const { eventId } = job.data as { eventId: string };
      // every add of this event id, in every process, returned this job's id
      for (const summary of summaries) expect(summary.returned[eventId]).toEqual([job.id]);
      // one add created it; the 99 others met it as a duplicate
      const d = digest({ queue: queueName, name: 'event', lockArgs: eventId });
      expect(total(summaries, 'locked', d)).toBe(1);
      expect(total(summaries, 'duplicates', d)).toBe(99);
      // and its lock is the BullMQ deduplication key holding its id
      expect(await redis.get(lockKey({ queue: queueName, name: 'event', lockArgs: eventId }))).toBe(job.id);
    }
    expect(await lockKeys(redis, prefix, queueName)).toHaveLength(10);
  }, 45_000);

  it('semaphore path (lockLimit 1, unique across queues): 4 producers on 2 queues, exactly one lock holder per digest', async () => {
    const queueNames = [uniqueName('conc-a'), uniqueName('conc-b')];
    const prefix = uniqueName('ujc');
    prefixes.push(prefix);
    const [queueA, queueB] = queueNames.map(openQueue);
    const eventIds = Array.from({ length: 5 }, (_, i) => `evt_${i}`);
    const summaries = await runProducers(
      Array.from({ length: 4 }, (_, i) => ({
        QUEUES: queueNames.join(','),
        QUEUE: queueNames[i % 2],
        PREFIX: prefix,
        COUNT: '100',
        EVENT_IDS: eventIds.join(','),
        IN_FLIGHT: '8',
        UNIQUE_ACROSS: 'queues',
      })),
    );
    expect(summaries.map((s) => s.errors)).toEqual([[], [], [], []]);
    expect(summaries.map((s) => s.queue)).toEqual([...queueNames, ...queueNames]);

    const jobs = [...(await queueA.getJobs(['wait'], 0, -1)), ...(await queueB.getJobs(['wait'], 0, -1))];
    const counts = [await queueA.getJobCounts('wait'), await queueB.getJobCounts('wait')];
    expect(counts[0].wait + counts[1].wait).toBe(5);
    expect(jobs.map((job) => (job.data as { eventId: string }).eventId).sort()).toEqual(eventIds);

    for (const job of jobs) {
      const { eventId } = job.data as { eventId: string };
      const d = digest({ queue: job.queueName, name: 'event', lockArgs: eventId, uniqueAcross: 'queues' });
      const key = lockKey({ queue: job.queueName, name: 'event', lockArgs: eventId, uniqueAcross: 'queues', prefix });
      expect(key).toBe(`${prefix}:{${d}}:queued`);
      // one holder: the job that was created
      expect(await redis.zrange(key, 0, '-1')).toEqual([job.id]);
      for (const summary of summaries) expect(summary.returned[eventId]).toEqual([job.id]);
      expect(total(summaries, 'locked', d)).toBe(1);
      expect(total(summaries, 'duplicates', d)).toBe(79);
    }
    // no BullMQ deduplication keys on this path; one semaphore per digest
    expect(await lockKeys(redis, prefix, queueNames[0])).toHaveLength(5);
    expect(await scanKeys(redis, `bull:${queueNames[1]}:de:*`)).toEqual([]);
  }, 45_000);

  // Found by a hostile review (session 26): BullMQ's removal answers 1 for a job already gone, so producers replacing
  // one holder at once each reported it replaced, and a call that removed several holders on its way (others took the
  // lock between its removal and its add) reported only the last.
  it.each([1, 2])(
    'replace, lockLimit %i: 4 producers × 150 adds over 3 event ids; every job removed is reported replaced exactly once, the jobs left hold the lock',
    async (lockLimit) => {
      const queueName = uniqueName('conc-r');
      const prefix = uniqueName('ujc');
      prefixes.push(prefix);
      const queue = openQueue(queueName);
      const eventIds = ['evt_a', 'evt_b', 'evt_c'];
      const summaries = await runProducers(
        Array.from({ length: 4 }, () => ({
          QUEUES: queueName,
          PREFIX: prefix,
          COUNT: '150',
          EVENT_IDS: eventIds.join(','),
          IN_FLIGHT: '6',
          ON_CONFLICT: 'replace',
          LOCK_LIMIT: String(lockLimit),
        })),
      );
      expect(summaries.map((s) => s.errors)).toEqual([[], [], [], []]);
      const created = summaries.flatMap((s) => s.created);
      const replaced = summaries.flatMap((s) => s.replaced);
      const left = (await queue.getJobs(['wait'], 0, -1)).map((job) => job.id!);
      expect(left).toHaveLength(eventIds.length * lockLimit);
      // every job created is either left or was reported replaced, by one producer only
      expect([...replaced].sort()).toEqual(created.filter((id) => !left.includes(id)).sort());
      expect(replaced.length).toBeGreaterThan(0);
      // and the jobs left are the lock's holders
      for (const eventId of eventIds) {
        const mine = (await queue.getJobs(['wait'], 0, -1))
          .filter((job) => (job.data as { eventId: string }).eventId === eventId)
          .map((job) => job.id!);
        const key = lockKey({ queue: queueName, name: 'event', lockArgs: eventId, lockLimit, prefix });
        const holders = lockLimit === 1 ? [(await redis.get(key))!] : await redis.zrange(key, 0, '-1');
        expect(holders.sort()).toEqual(mine.sort());
      }
    },
    60_000,
  );

  it('while_executing: 3 worker processes never run two jobs of one digest at the same time', async () => {
    const queueName = uniqueName('conc-w');
    const prefix = uniqueName('ujc');
    const probe = uniqueName('probe');
    prefixes.push(prefix, probe);
    openQueue(queueName);
    const keys = ['k0', 'k1', 'k2', 'k3'];
    const jobCount = 60;

    const workers = Array.from({ length: 3 }, (_, i) =>
      spawnFixture('concurrency-worker', {
        QUEUE: queueName,
        PREFIX: prefix,
        PROBE: probe,
        LABEL: `w${i}`,
        CONCURRENCY: '4',
        WORK_MS: '20',
        RESCHEDULE_IN: '20',
      }),
    );
    await Promise.all(workers.map((w) => w.waitFor((m) => m.ready === true)));

    // a producer-only app with the same definition enqueues every job in one round trip
    app = await startApp({
      queue: queueName,
      module: {
        prefix,
        jobs: [defineUniqueJob({ queue: queueName, lock: 'while_executing', lockArgs: (d: { key: string }) => d.key })],
      },
    });
    const added = await app.queue.addBulk(
      Array.from({ length: jobCount }, (_, i) => ({ name: 'work', data: { key: keys[i % keys.length], i } })),
    );
    expect(new Set(added.map((job) => job.id)).size).toBe(jobCount);

    // bounded wait for the workers to drain the queue
    const deadline = Date.now() + 30_000;
    let counts = await app.queue.getJobCounts('completed', 'failed');
    while (counts.completed + counts.failed < jobCount && Date.now() < deadline) {
      await sleep(100);
      counts = await app.queue.getJobCounts('completed', 'failed');
    }
    expect(counts).toEqual({ completed: jobCount, failed: 0 });

    // graceful exit on SIGTERM
    for (const worker of workers) worker.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.waitFor((m) => m.closed === true)));
    for (const exit of await Promise.all(workers.map((w) => w.exited))) {
      expect(exit).toMatchObject({ code: 0, signal: null });
    }

    const runs = (await redis.lrange(`${probe}:runs`, 0, -1)).map((line) => JSON.parse(line) as RunRecord);
    // every job ran exactly once (a conflicting job was rescheduled, not run)
    expect(runs).toHaveLength(jobCount);
    expect(new Set(runs.map((run) => run.jobId))).toEqual(new Set(added.map((job) => job.id)));
    // no run ever found another run of its digest inside: INCR always returned 1, DECR 0
    expect(runs.filter((run) => run.entered !== 1 || run.left !== 0)).toEqual([]);
    // and by the shared Redis clock, the runs of one digest never overlapped
    for (const key of keys) {
      const ofKey = runs.filter((run) => run.key === key).sort((a, b) => a.start - b.start);
      expect(ofKey).toHaveLength(jobCount / keys.length);
      for (let i = 1; i < ofKey.length; i++) expect(ofKey[i].start).toBeGreaterThanOrEqual(ofKey[i - 1].end);
    }
    // the race was real: more than one process ran jobs, and conflicts were met (and rescheduled)
    expect(new Set(runs.map((run) => run.worker)).size).toBeGreaterThanOrEqual(2);
    const reschedules = await Promise.all(
      added.map(async (job) => Number((await redis.hget(`bull:${queueName}:${job.id}`, 'ujReschedules')) ?? 0)),
    );
    expect(reschedules.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    // the producer's definition and the workers' processor agree on the digest of the stored data
    const first = await app.queue.getJob(added[0].id!);
    expect(app.service.digestOf(queueName, 'work', first!.data)).toBe(
      digest({ queue: queueName, name: 'work', lockArgs: 'k0' }),
    );
    // every run-time lock was released
    expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
  }, 55_000);
});
