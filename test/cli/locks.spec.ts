// `unique-jobs locks list|show|release` and `unique-jobs digest`, run as a child process (the built executable)
// against real locks that a real app took: a fast-path lock (BullMQ deduplication key), a general-path lock and a
// run-time lock. Every assertion is on the CLI's output and exit code and on the keys in Redis.
import { describe, expect, it, jest } from '@jest/globals';
import { Queue } from 'bullmq';
import type { HeldLock } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { hold } from '../support/gates.js';
import { byId, dedupKey, digestOf, queuedKey, runningKey } from '../support/locks.js';
import { runCli, runCliJson, skewedClock } from './run-cli.js';
import { bullOptions, bullPrefix, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

// Each test spawns the CLI several times (a Node process each): generous on a loaded machine.
jest.setTimeout(120_000);

type Listing = { locks: HeldLock[]; cursor: string; searched?: Record<string, unknown> };
type Shown = { digest: string; locks: HeldLock[] };
type Released = { digest: string; dryRun: boolean; keys: string[]; released: number };

describe('unique-jobs locks', () => {
  const { redis, start, onCleanup } = useApps('cli-locks', {
    unique: { lock: 'until_executed', lockArgs: byId },
    paused: true,
  });
  const scoped = (app: TestApp, ...args: string[]) => [...args, '--prefix', app.prefix];

  it('lists, shows and releases a fast-path lock (BullMQ deduplication key)', async () => {
    const app = await start();
    const job = await app.queue.add('job', { id: 'a', note: 'hello' });
    const digest = digestOf(app, 'job', { id: 'a' });
    const key = dedupKey(app.queue.name, digest);

    const listed = await runCliJson<Listing>(scoped(app, 'locks', 'list', '--queue', app.queue.name));
    expect(listed.code).toBe(0);
    expect(listed.json).toEqual({
      cursor: '0',
      searched: expect.objectContaining({ prefix: app.prefix, queues: [app.queue.name] }),
      locks: [
        {
          digest,
          kind: 'enqueue',
          storage: 'deduplication',
          key,
          queue: app.queue.name,
          owners: [{ jobId: job.id, jobState: 'waiting', jobName: 'job', since: job.timestamp, queue: app.queue.name }],
        },
      ],
    });
    const table = await runCli(scoped(app, 'locks', 'list', digest.slice(0, 10), '--queue', app.queue.name));
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^DIGEST\s+KIND\s+STORAGE\s+QUEUE\s+OWNER\s+STATE\s+CREATED\s+TTL/);
    expect(table.stdout).toContain(digest);
    expect(table.stdout).toContain(job.id);
    expect(table.stdout).toContain('1 lock.');
    // A listing that finds locks says where it looked too (another prefix is not listed).
    expect(table.stdout).toMatch(/Searched under prefix "[^"]+" and in the deduplication keys of queue /);

    const shown = await runCli(scoped(app, 'locks', 'show', digest));
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`Digest ${digest}`);
    expect(shown.stdout).toContain(key);
    expect(shown.stdout).toContain(`job ${job.id}  waiting`);
    expect(shown.stdout).toContain('{"id":"a","note":"hello"}');

    // Without --yes nothing is deleted: it says what it would do.
    const plan = await runCli(scoped(app, 'locks', 'release', digest));
    expect(plan.code).toBe(0);
    expect(plan.stdout).toContain('Would delete 1 key:');
    expect(plan.stdout).toContain(key);
    expect(plan.stdout).toContain('--yes');
    expect(await redis.get(key)).toBe(job.id);

    const released = await runCliJson<Released>(scoped(app, 'locks', 'release', digest, '--yes'));
    expect(released).toMatchObject({ code: 0, json: { digest, dryRun: false, keys: [key], released: 1 } });
    expect(await redis.exists(key)).toBe(0);
    expect((await runCliJson<Shown>(scoped(app, 'locks', 'show', digest))).json).toMatchObject({ digest, locks: [] });
    // The lock is free again: the same job data is admitted.
    expect((await app.service.enqueue(app.queue, 'job', { id: 'a' })).status).toBe('enqueued');
  });

  it('scans for every queue by default; with --registered-queues reads the queues the app recorded instead', async () => {
    const app = await start();
    const job = await app.queue.add('job', { id: 'r' });
    // A queue the library never guarded, under the same BullMQ prefix (its meta key is what a scan finds).
    const plain = new Queue(uniqueName('cli-plain'), bullOptions());
    onCleanup(async () => {
      await plain.obliterate({ force: true });
      await plain.close();
    });
    await plain.add('plain', {});
    const registry = `${app.prefix}:{queues}:known`;
    // Recorded at bootstrap, not waited for.
    await waitFor('the queue registry', async () => (await redis.exists(registry)) === 1);
    expect(await redis.smembers(registry)).toEqual([`${bullPrefix()}:${app.queue.name}`]);

    // Default: every BullMQ queue found by a scan (the registry may miss a queue the app never guarded).
    const scanned = await runCliJson<Listing>(scoped(app, 'locks', 'list', '--limit', '1000'));
    expect(scanned.code).toBe(0);
    expect((scanned.json.searched as { queues: string[] }).queues).toEqual(
      expect.arrayContaining([app.queue.name, plain.name]),
    );
    // Of this test's queues (the scan also finds the queues other test files hold locks in, on a shared Redis).
    const ours = scanned.json.locks.filter((lock) => lock.queue === app.queue.name || lock.queue === plain.name);
    expect(ours.map((lock) => lock.owners[0].jobId)).toEqual([job.id]);
    // --registered-queues: the registry only, no scan, so the plain queue is not searched.
    const listed = await runCliJson<Listing>(scoped(app, 'locks', 'list', '--registered-queues'));
    expect(listed.code).toBe(0);
    expect(listed.json.searched).toMatchObject({ queues: [app.queue.name] });
    expect(listed.json.locks.map((lock) => lock.owners[0].jobId)).toEqual([job.id]);
    // A --queue the registry does not name is looked for by a scan.
    const other = await runCliJson<Listing>(scoped(app, 'locks', 'list', '--registered-queues', '--queue', plain.name));
    expect(other.code).toBe(0);
    expect(other.json.locks).toEqual([]);
    // Without a registry (no process of this version ran under the prefix), it scans.
    await redis.del(registry);
    const fallback = await runCliJson<Listing>(scoped(app, 'locks', 'list', '--registered-queues'));
    expect((fallback.json.searched as { queues: string[] }).queues).toEqual(
      expect.arrayContaining([app.queue.name, plain.name]),
    );
  });

  it('shows and releases a general-path lock (lockLimit 2) with both owners', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    const first = await app.queue.add('job', { id: 'a', n: 1 });
    const second = await app.queue.add('job', { id: 'a', n: 2 });
    const digest = digestOf(app, 'job', { id: 'a' });
    const key = queuedKey(app.prefix, digest);

    const shown = await runCliJson<Shown>(scoped(app, 'locks', 'show', digest.slice(3))); // bare hex works too
    expect(shown.code).toBe(0);
    expect(shown.json.locks).toHaveLength(1);
    expect(shown.json.locks[0]).toMatchObject({ digest, kind: 'enqueue', storage: 'queued', key });
    expect(shown.json.locks[0].owners.map((owner) => owner.jobId).sort()).toEqual([first.id, second.id].sort());

    const runtimeOnly = await runCliJson<Released>(
      scoped(app, 'locks', 'release', digest, '--kind', 'runtime', '--yes'),
    );
    expect(runtimeOnly.json).toMatchObject({ released: 0, keys: [] });
    expect(await redis.zcard(key)).toBe(2);

    const released = await runCliJson<Released>(scoped(app, 'locks', 'release', digest, '--yes'));
    expect(released.json).toMatchObject({ released: 1, keys: [key] });
    expect(await redis.exists(key)).toBe(0);
  });

  /** An app whose job holds a run-time lock (its handler waits until the test ends), the job and the lock's digest. */
  async function holdingRuntimeLock() {
    const started = deferred();
    const gate = hold();
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId },
      paused: false,
      handler: async () => {
        started.resolve();
        await gate.promise;
      },
    });
    // A job id of its own: BullMQ's counter ids ("1") repeat across queues, and a run-time lock records only the id,
    // so with another test's active job "1" on the same Redis the owner's queue would be a guess (documented).
    const job = await app.queue.add('job', { id: 'a' }, { jobId: uniqueName('rt') });
    await started.promise;
    return { app, job, digest: digestOf(app, 'job', { id: 'a' }) };
  }

  it('lists and releases a run-time lock held by an active job', async () => {
    const { app, job, digest } = await holdingRuntimeLock();
    const key = runningKey(app.prefix, digest);

    const listed = await runCliJson<Listing>(scoped(app, 'locks', 'list', '--kind', 'runtime'));
    expect(listed.json.locks).toEqual([
      expect.objectContaining({ digest, kind: 'runtime', storage: 'running', key, queue: app.queue.name }),
    ]);
    expect(listed.json.locks[0].owners).toEqual([
      expect.objectContaining({ jobId: job.id, jobState: 'active', leaseExpiresAt: expect.any(Number) }),
    ]);
    const enqueueLocks = scoped(app, 'locks', 'list', '--kind', 'enqueue', '--queue', app.queue.name);
    expect((await runCliJson<Listing>(enqueueLocks)).json.locks).toEqual([]);
    expect(
      (await runCliJson<Listing>(scoped(app, 'locks', 'list', '--job-id', 'another-job', '--kind', 'runtime'))).json,
    ).toMatchObject({ locks: [], cursor: '0' });

    const released = await runCliJson<Released>(scoped(app, 'locks', 'release', digest, '--kind', 'runtime', '--yes'));
    expect(released.json).toMatchObject({ released: 1, keys: [key] });
    expect(await redis.exists(key)).toBe(0);
  });

  // Found by a hostile review (session 27): the CLI told lease ends (written on Redis' clock) against the operator's
  // clock, so on a laptop 5 minutes ahead a live, renewed run-time lock showed "lease ended 4m 30s ago" — an operator
  // could release it on that word. The CLI now tells them against Redis' clock (one TIME).
  it('shows a live lease as live when the operator’s clock is 5 minutes ahead', async () => {
    const { app, digest } = await holdingRuntimeLock();
    const shown = await runCli(scoped(app, 'locks', 'show', digest), { nodeArgs: [skewedClock(5 * 60_000)] });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/lease {4}ends in /);
    expect(shown.stdout).not.toContain('ended');
  });

  it('pages with --limit and --cursor', async () => {
    const app = await start();
    const ids = ['a', 'b', 'c', 'd', 'e'];
    for (const id of ids) await app.queue.add('job', { id });
    const seen: string[] = [];
    let cursor = '0';
    let pages = 0;
    do {
      const page = await runCliJson<Listing>(
        scoped(app, 'locks', 'list', '--queue', app.queue.name, '--limit', '2', '--cursor', cursor),
      );
      expect(page.code).toBe(0);
      expect(page.json.locks.length).toBeLessThanOrEqual(2);
      seen.push(...page.json.locks.map((lock) => lock.digest));
      cursor = page.json.cursor;
      pages++;
    } while (cursor !== '0' && pages < 10);
    // As with SCAN, a lock may be listed twice where other clients' keys change the batches between pages (the shared
    // Redis; docs/operations.md "locks list"), never missed.
    expect([...new Set(seen)].sort()).toEqual(ids.map((id) => digestOf(app, 'job', { id })).sort());
    expect(pages).toBeGreaterThanOrEqual(3);
  });

  it('rejects a digest that is not hex, an unknown queue and a bad --limit, touching nothing', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'a' });
    const key = dedupKey(app.queue.name, digestOf(app, 'job', { id: 'a' }));

    for (const bad of ['not-a-digest', `v1:${'z'.repeat(64)}`, '*']) {
      const run = await runCli(scoped(app, 'locks', 'release', bad, '--yes'));
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^unique-jobs: Invalid digest .*64 hex characters/);
      expect(run.stdout).toBe('');
    }
    const pattern = await runCli(scoped(app, 'locks', 'list', 'bull:*'));
    expect(pattern.code).toBe(1);
    expect(pattern.stderr).toContain('Invalid digest pattern');
    const queue = await runCli(scoped(app, 'locks', 'list', '--queue', 'no-such-queue'));
    expect(queue.code).toBe(1);
    expect(queue.stderr).toContain('No queue "no-such-queue"');
    const limit = await runCli(scoped(app, 'locks', 'list', '--limit', '0'));
    expect(limit.code).toBe(1);
    expect(limit.stderr).toContain('--limit must be an integer from 1 to 1000');
    const json = await runCli(scoped(app, 'locks', 'show', 'xyz', '--json'));
    expect(JSON.parse(json.stderr)).toEqual({ error: { message: expect.stringContaining('hex'), exitCode: 1 } });
    expect(await redis.exists(key)).toBe(1);
  });
});

describe('unique-jobs digest', () => {
  const { redis, start } = useApps('cli-digest');

  it('computes the digest and lock key the library gives a job', async () => {
    const byEvent = (data: { eventId: string }) => [data.eventId];
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byEvent }, paused: true });
    const data = { eventId: 'evt_1', amount: 5 };
    const run = await runCliJson<{ digest: string; lock: string; enqueueLockKey: string }>([
      'digest',
      app.queue.name,
      'job',
      JSON.stringify(data),
      '--lock-args',
      'eventId',
      '--prefix',
      app.prefix,
    ]);
    expect(run.code).toBe(0);
    expect(run.json.digest).toBe(app.service.digestOf(app.queue.name, 'job', data));
    // The key it names is the one the lock lives in.
    const job = await app.queue.add('job', data);
    expect(await redis.get(run.json.enqueueLockKey)).toBe(job.id);
    expect(run.json).toEqual({
      digest: run.json.digest,
      lock: 'until_executed',
      enqueueLockKey: dedupKey(app.queue.name, run.json.digest),
    });
  });

  it('matches the library with the whole data, a scalar lockArgs, uniqueAcross and a run-time lock', async () => {
    const whole = await start({ unique: { lock: 'until_executed' }, paused: true });
    const data = { b: [1, { c: true }], a: 'x' };
    const plain = await runCli(['digest', whole.queue.name, 'job', JSON.stringify(data)], { connect: false });
    expect(plain.code).toBe(0);
    expect(plain.stdout.split('\n')[0]).toBe(whole.service.digestOf(whole.queue.name, 'job', data));

    const across = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: (d: { id: string }) => d.id, uniqueAcross: 'queues' },
      paused: true,
    });
    const run = await runCliJson<{ digest: string; enqueueLockKey: string; runtimeLockKey: string }>([
      'digest',
      across.queue.name,
      'job',
      '{"id":"a","other":1}',
      '--lock-args-json',
      '"a"',
      '--unique-across',
      'queues',
      '--lock',
      'until_and_while_executing',
      '--prefix',
      across.prefix,
    ]);
    const digest = across.service.digestOf(across.queue.name, 'job', { id: 'a', other: 1 })!;
    expect(run.json).toEqual({
      digest,
      lock: 'until_and_while_executing',
      enqueueLockKey: queuedKey(across.prefix, digest),
      runtimeLockKey: runningKey(across.prefix, digest),
    });
  });

  it('explains bad input', async () => {
    const badJson = await runCli(['digest', 'q', 'job', '{nope'], { connect: false });
    expect(badJson.code).toBe(1);
    expect(badJson.stderr).toMatch(/^unique-jobs: job data must be JSON/);
    const missing = await runCli(['digest', 'q', 'job', '{"a":1}', '--lock-args', 'b'], { connect: false });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('the job data has no field "b"');
    const lock = await runCli(['digest', 'q', 'job', '{}', '--lock', 'forever'], { connect: false });
    expect(lock.code).toBe(1);
    expect(lock.stderr).toContain('--lock must be one of until_executing, until_executed');
    const usage = await runCli(['digest', 'q'], { connect: false });
    expect(usage.code).toBe(1);
    expect(usage.stderr).toContain('Missing job name');
    expect(usage.stderr).toContain('Usage: unique-jobs');
  });
});
