// `unique-jobs dead|keys|reap` and the CLI's error handling, run as a child process (the built executable) against
// what a real app left in Redis: dead-set entries, idempotency records, an orphaned lock.
import { createServer, type Socket } from 'node:net';
import { describe, expect, it, jest } from '@jest/globals';
import type { DeadSetEntry, ReapReport } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { nestedPayload } from '../support/payloads.js';
import { asDuplicate, byId, dedupKey, digestOf, queuedKey, removeUnguarded, runningKey } from '../support/locks.js';
import { redisClient, uniqueName } from '../support/redis.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { runCli, runCliJson } from './run-cli.js';

// Each test spawns the CLI several times (a Node process each): generous on a loaded machine.
jest.setTimeout(120_000);

type DeadList = { size: number; offset: number; entries: DeadSetEntry[] };

/** A TCP port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

describe('unique-jobs dead', () => {
  const { redis, start } = useApps('cli-dead', {
    unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
    paused: true,
  });
  const scoped = (app: TestApp, ...args: string[]) => [...args, '--prefix', app.prefix];

  it('lists, retries (kept while the lock is held, enqueued under the lock once free) and deletes entries', async () => {
    const app = await start();
    const holder = await app.queue.add('job', { id: 'a', n: 0 });
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 }));
    const id = dup.deadSetEntryId!;
    const digest = digestOf(app, 'job', { id: 'a' });

    const listed = await runCliJson<DeadList>(scoped(app, 'dead', 'list'));
    expect(listed.code).toBe(0);
    expect(listed.json).toMatchObject({ size: 1, offset: 0 });
    expect(listed.json.entries).toEqual([
      expect.objectContaining({ id, queue: app.queue.name, jobName: 'job', data: { id: 'a', n: 1 }, digest }),
    ]);
    const table = await runCli(scoped(app, 'dead', 'list'));
    expect(table.stdout).toMatch(/^ID\s+REJECTED\s+QUEUE\s+JOB\s+SIDE\s+HOLDER\s+REASON/);
    expect(table.stdout).toContain(id);
    expect(table.stdout).toContain('1 of 1 entry');

    // The holder still holds the lock: the retry is a duplicate, and the entry stays.
    const held = await runCliJson(scoped(app, 'dead', 'retry', id));
    expect(held).toMatchObject({ code: 1, json: { id, status: 'duplicate', existingJobId: holder.id, kept: true } });
    expect((await app.service.deadSet.get(id))?.data).toEqual({ id: 'a', n: 1 });
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });

    // Once the holder is gone, the retry enqueues the job under the lock (BullMQ's deduplication key).
    await holder.remove();
    const retried = await runCliJson<{ status: string; jobId: string }>(scoped(app, 'dead', 'retry', id));
    expect(retried).toMatchObject({ code: 0, json: { id, status: 'enqueued', queue: app.queue.name, digest } });
    const job = await app.queue.getJob(retried.json.jobId);
    expect(job?.data).toEqual({ id: 'a', n: 1 });
    expect(await redis.get(dedupKey(app.queue.name, digest))).toBe(retried.json.jobId);
    expect(await app.service.deadSet.size()).toBe(0);

    // Delete: without --yes it only says what it would delete.
    const again = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 }));
    const plan = await runCli(scoped(app, 'dead', 'delete', again.deadSetEntryId!));
    expect(plan.code).toBe(0);
    expect(plan.stdout).toContain(`Entry ${again.deadSetEntryId}`);
    expect(plan.stdout).toContain('run again with --yes');
    expect(await app.service.deadSet.size()).toBe(1);
    const deleted = await runCliJson(scoped(app, 'dead', 'delete', again.deadSetEntryId!, '--yes'));
    expect(deleted).toMatchObject({ code: 0, json: { id: again.deadSetEntryId, deleted: true } });
    expect(await app.service.deadSet.size()).toBe(0);
    expect(await redis.get(dedupKey(app.queue.name, digest))).toBe(retried.json.jobId);
  });

  it('retries a general-path entry when told the lock (--lock-limit)', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject', lockLimit: 2 } });
    await app.queue.add('job', { id: 'a', n: 0 });
    const second = await app.queue.add('job', { id: 'a', n: 1 });
    const dup = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 }));
    const key = queuedKey(app.prefix, dup.digest);

    const full = await runCliJson(scoped(app, 'dead', 'retry', dup.deadSetEntryId!, '--lock-limit', '2'));
    expect(full).toMatchObject({ code: 1, json: { status: 'duplicate' } });
    expect(await redis.zcard(key)).toBe(2);

    await second.remove();
    await redis.zrem(key, second.id!); // a removed job keeps its slot until its lease ends: free it as the reaper would
    const retried = await runCliJson<{ jobId: string }>(
      scoped(app, 'dead', 'retry', dup.deadSetEntryId!, '--lock-limit', '2'),
    );
    expect(retried).toMatchObject({ code: 0, json: { status: 'enqueued' } });
    expect((await redis.zrange(key, '0', '-1')).sort()).toContain(retried.json.jobId);
    expect(await redis.zcard(key)).toBe(2);
  });

  it('refuses to retry an entry rejected under another BullMQ prefix than --bull-prefix, and keeps it', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'p', n: 0 });
    const id = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'p', n: 1 })).deadSetEntryId!;
    const stored = (await app.service.deadSet.get(id))!;
    // As the same application kept it in another environment (BullMQ prefix 'staging') on the same library prefix.
    await redis.hset(`${app.prefix}:{dead}:entries`, id, JSON.stringify({ ...stored, bullPrefix: 'staging' }));
    const refused = await runCli(scoped(app, 'dead', 'retry', id));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`under the BullMQ prefix "staging"`);
    expect(refused.stderr).toContain('(use --bull-prefix)');
    expect(await app.service.deadSet.get(id)).toMatchObject({ bullPrefix: 'staging' });
    // Listed, and shown by a delete without --yes, with its prefix: an operator sees which environment it is from.
    expect((await runCli(scoped(app, 'dead', 'list'))).stdout).toContain(`staging:${app.queue.name}`);
    expect((await runCli(scoped(app, 'dead', 'delete', id))).stdout).toContain(`queue     staging:${app.queue.name}`);
    // An empty prefix, which --bull-prefix cannot name: the CLI says where to retry it instead.
    await redis.hset(`${app.prefix}:{dead}:entries`, id, JSON.stringify({ ...stored, bullPrefix: '' }));
    const empty = await runCli(scoped(app, 'dead', 'retry', id));
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('under an empty BullMQ prefix');
    expect(await app.service.deadSet.get(id)).toMatchObject({ bullPrefix: '' });
  });

  // JSON.stringify with an indent made this entry (~100 KB) more text than a string can hold: both commands failed.
  it('a deeply nested entry: listed whole as JSON, described in one line of at most 200 characters', async () => {
    const app = await start();
    const payload = nestedPayload(2_000, 20_000);
    await app.queue.add('job', { id: 'deep', n: 0 });
    const id = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'deep', payload })).deadSetEntryId!;
    const listed = await runCliJson<DeadList>(scoped(app, 'dead', 'list'));
    expect(listed.code).toBe(0);
    expect(listed.json.entries).toEqual([expect.objectContaining({ id, data: { id: 'deep', payload } })]);
    const plan = await runCli(scoped(app, 'dead', 'delete', id));
    expect(plan.code).toBe(0);
    const data = plan.stdout.split('\n').find((line) => line.startsWith('  data'));
    expect(data).toBe(`  data      ${JSON.stringify({ id: 'deep', payload }).slice(0, 199)}…`);
  });

  // The CLI does not know the application's deadSet option (here 30 days, where the default is 7).
  it('a retry that fails puts its entry back without dropping what the application keeps or shortening its expiry', async () => {
    const day = 24 * 60 * 60 * 1000;
    const app = await start({ module: { deadSet: { maxAge: 30 * day } } });
    await app.queue.add('job', { id: 'kept', n: 0 });
    const a = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'kept', n: 1 })).deadSetEntryId!;
    const b = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'kept', n: 2 })).deadSetEntryId!;
    const keys = new UniqueJobsKeys(app.prefix);
    await redis.zadd(keys.deadSetIndex, 'XX', Date.now() - 10 * day, b); // rejected 10 days ago
    const listed = await runCliJson<DeadList>(scoped(app, 'dead', 'list'));
    expect(listed.json.entries.map((entry) => entry.id)).toEqual([a, b]);
    expect((await runCliJson(scoped(app, 'dead', 'retry', a))).code).toBe(1); // its lock is held: put back
    expect((await app.service.deadSet.list()).map((entry) => entry.id).sort()).toEqual([a, b].sort());
    for (const key of [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes]) {
      expect([key, (await redis.pttl(key)) > 29 * day]).toEqual([key, true]);
    }
  });

  it('rejects an id that is not a UUID and reports one that does not exist', async () => {
    const app = await start();
    const bad = await runCli(scoped(app, 'dead', 'delete', '../../etc', '--yes'));
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('entry ids are UUIDs');
    const unknown = await runCli(scoped(app, 'dead', 'retry', '00000000-0000-4000-8000-000000000000'));
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('No dead-set entry 00000000-0000-4000-8000-000000000000');
    const empty = await runCli(scoped(app, 'dead', 'list'));
    expect(empty.code).toBe(0);
    expect(empty.stdout).toMatch(
      new RegExp(
        `^The dead set under prefix "${app.prefix}" \\(${app.prefix}:\\{dead\\}:index\\) is empty, on redis://`,
      ),
    );
  });
});

describe('unique-jobs keys show', () => {
  const { start } = useApps('cli-keys');

  it('shows the record of an idempotency key by scope or by queue and job name', async () => {
    const app = await start({
      idempotency: { key: (job) => (job.data as { orderId: string }).orderId },
      handler: async (job) => ({ charged: (job.data as { amount: number }).amount }),
    });
    const job = await app.queue.add('charge', { orderId: 'order-1', amount: 42 });
    await app.finished(job);

    const byName = await runCliJson<{ found: boolean; record: Record<string, unknown> }>([
      'keys',
      'show',
      'order-1',
      '--queue',
      app.queue.name,
      '--name',
      'charge',
      '--prefix',
      app.prefix,
    ]);
    expect(byName.code).toBe(0);
    expect(byName.json).toMatchObject({
      scope: `${app.queue.name}:charge`,
      key: 'order-1',
      found: true,
      record: { state: 'completed', jobId: job.id, result: JSON.stringify({ charged: 42 }), attempts: 1 },
    });
    const human = await runCli([
      'keys',
      'show',
      'order-1',
      '--scope',
      `${app.queue.name}:charge`,
      '--prefix',
      app.prefix,
    ]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('State       completed');
    expect(human.stdout).toContain('{"charged":42}');

    const absent = await runCliJson([
      'keys',
      'show',
      'order-2',
      '--scope',
      `${app.queue.name}:charge`,
      '--prefix',
      app.prefix,
    ]);
    expect(absent).toMatchObject({ code: 0, json: { found: false, record: null } });
    const noScope = await runCli(['keys', 'show', 'order-1', '--prefix', app.prefix]);
    expect(noScope.code).toBe(1);
    expect(noScope.stderr).toContain('--scope <scope>, or --queue <queue> --name <job name>');
  });
});

describe('unique-jobs reap', () => {
  const { redis, start } = useApps('cli-reap', {
    unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
    paused: true,
  });

  it('--dry-run reports an orphaned lock and changes nothing; without it the orphan is released', async () => {
    const app = await start();
    const kept = await app.queue.add('job', { id: 'a', n: 1 });
    const removed = await app.queue.add('job', { id: 'a', n: 2 });
    const key = queuedKey(app.prefix, digestOf(app, 'job', { id: 'a' }));
    await removeUnguarded(app.queue.name, removed.id!); // behind the library's back: the slot stays, an orphan

    const dry = await runCliJson<ReapReport>(['reap', '--dry-run', '--queue', app.queue.name, '--prefix', app.prefix]);
    expect(dry.code).toBe(0);
    expect(dry.json).toMatchObject({ dryRun: true, leader: true, complete: true });
    expect(dry.json.items).toContainEqual({ key, kind: 'enqueueLock', jobId: removed.id, reason: 'job gone' });
    expect(dry.json.items.some((item) => item.jobId === kept.id)).toBe(false);
    expect((await redis.zrange(key, '0', '-1')).sort()).toEqual([kept.id, removed.id].sort());
    const human = await runCli(['reap', '--dry-run', '--queue', app.queue.name, '--prefix', app.prefix]);
    expect(human.stdout).toContain('Dry run: nothing was changed.');
    expect(human.stdout).toContain(removed.id);

    // --grace 1: released if still orphaned one second after it was found (the reaper's default grace is 15 s).
    const real = await runCliJson<ReapReport>([
      'reap',
      '--grace',
      '1',
      '--queue',
      app.queue.name,
      '--prefix',
      app.prefix,
    ]);
    expect(real.code).toBe(0);
    expect(real.json).toMatchObject({ dryRun: false, complete: true });
    expect(real.json.items).toContainEqual({ key, kind: 'enqueueLock', jobId: removed.id, reason: 'job gone' });
    expect(await redis.zrange(key, '0', '-1')).toEqual([kept.id]);
  });

  it('while an application leads the reaper: --dry-run runs all the same; a real run exits 1 saying who keeps the leadership and for how long', async () => {
    const app = await start();
    const removed = await app.queue.add('job', { id: 'l', n: 1 });
    await removeUnguarded(app.queue.name, removed.id!);
    // The leadership as an application's reaper keeps it between its runs.
    const leader = `${app.prefix}:{reaper}:leader`;
    await redis.zadd(leader, Date.now() + 120_000, 'reaper-an-application');
    await redis.pexpire(leader, 120_000);
    try {
      const dry = await runCliJson<ReapReport>([
        'reap',
        '--dry-run',
        '--queue',
        app.queue.name,
        '--prefix',
        app.prefix,
      ]);
      expect(dry.code).toBe(0);
      expect(dry.json.items.map((item) => item.jobId)).toEqual([removed.id]);
      const real = await runCli(['reap', '--grace', '1', '--queue', app.queue.name, '--prefix', app.prefix]);
      expect(real.code).toBe(1);
      expect(real.stderr).toMatch(
        /Another process holds the reaper leadership under prefix "[^"]+": an application whose reaper is on keeps it while it runs, .*; it gives it up as it shuts down, and it lapses within 1\d\d s if that process died now.*--dry-run needs no leadership/,
      );
      expect(await redis.zrange(leader, '0', '-1')).toEqual(['reaper-an-application']);
    } finally {
      await redis.del(leader);
    }
  });
});

describe('unique-jobs errors', () => {
  it('Redis unreachable: one clear line and exit code 2', async () => {
    const port = await closedPort();
    const run = await runCli(['locks', 'list', '--redis', `redis://user:secret@127.0.0.1:${port}`], { connect: false });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `unique-jobs: Cannot reach Redis at redis://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    expect(run.stderr).not.toContain('secret');
    expect(run.stdout).toBe('');
    const json = await runCli(['dead', 'list', '--json', '--redis', `redis://127.0.0.1:${port}`], { connect: false });
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: { message: expect.stringContaining('Cannot reach Redis'), exitCode: 2 },
    });
  });

  it('a server that accepts the connection and never answers: one clear line and exit code 2, not a hang', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket)); // reads nothing, answers nothing
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    try {
      const run = await runCli(['locks', 'list', '--timeout', '2', '--redis', `redis://127.0.0.1:${port}`], {
        connect: false,
      });
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(
        `unique-jobs: Cannot reach Redis at redis://127.0.0.1:${port}: no answer within 2 s (is it a Redis server?)\n`,
      );
      expect(run.stdout).toBe('');
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('a server that stops answering once connected (a paused master): one clear line and exit code 2, not a hang', async () => {
    // Answers the connection's handshake (INFO, PING, CLIENT) as a Redis would, then never answers a SCAN (nor QUIT).
    const sockets = new Set<Socket>();
    let quitAt: number | undefined;
    let closedAt: number | undefined;
    const stalled = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => (closedAt = Date.now()));
      socket.setEncoding('utf8').on('data', (chunk: string) => {
        for (const [, command] of chunk.matchAll(/\*\d+\r\n\$\d+\r\n(\w+)\r\n/g)) {
          const name = command.toLowerCase();
          if (name === 'info') socket.write('$22\r\nloading:0\r\nrole:master\r\n');
          else if (name === 'ping') socket.write('+PONG\r\n');
          else if (name === 'quit') quitAt = Date.now();
          else if (name !== 'scan') socket.write('+OK\r\n');
        }
      });
    });
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
    const { port } = stalled.address() as { port: number };
    try {
      const run = await runCli(['locks', 'list', '--timeout', '4', '--redis', `redis://127.0.0.1:${port}`], {
        connect: false,
      });
      expect([run.code, run.stderr, run.stdout]).toEqual([
        2,
        `unique-jobs: Cannot reach Redis at redis://127.0.0.1:${port}: no answer within 4 s\n`,
        '',
      ]);
      // Its goodbye goes unanswered too: the connection is dropped about a second after QUIT, not another timeout later.
      expect(quitAt).toBeDefined();
      expect(closedAt! - quitAt!).toBeLessThan(3000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => stalled.close(resolve));
    }
  });

  it('unknown command, subcommand or option: the usage, exit code 1; --help: the usage, exit code 0', async () => {
    const unknown = await runCli(['frobnicate'], { connect: false });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unique-jobs: Unknown command "frobnicate"');
    expect(unknown.stderr).toContain('Usage: unique-jobs <command> [options]');
    const sub = await runCli(['locks', 'frob'], { connect: false });
    expect(sub.code).toBe(1);
    expect(sub.stderr).toContain('Unknown subcommand "locks frob"');
    const option = await runCli(['locks', 'list', '--frob'], { connect: false });
    expect(option.code).toBe(1);
    expect(option.stderr).toContain("Unknown option '--frob'");
    for (const [args, message] of [
      [['locks', 'list', '--timeout', '0'], '--timeout must be an integer from 1 to 3600 (got "0")'],
      [['reap', '--grace', '1.5'], '--grace must be an integer from 1 to 300 (got "1.5")'],
    ] as const) {
      const bad = await runCli(args, { connect: false });
      expect([bad.code, bad.stderr]).toEqual([1, `unique-jobs: ${message}\n`]);
    }
    const none = await runCli([], { connect: false });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('Missing command');
    const help = await runCli(['--help'], { connect: false });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('locks list [pattern]');
    expect(help.stdout).toContain(
      'Exit codes: 0 done (a lookup that finds nothing is done: it exits 0 and says where it looked)',
    );
  });

  it('never prints the password of a Redis URL it refuses; a cursor past SCAN’s range is an invalid cursor', async () => {
    for (const url of [
      'redis://ops:s3cret/pw@127.0.0.1:1',
      'redis://ops:s3c@ret@127.0.0.1:x',
      'redis://h:abc/?db=0&password=s3cret',
    ]) {
      const run = await runCli(['locks', 'list', '--redis', url], { connect: false });
      expect([url, run.code, run.stderr]).toEqual([url, 1, expect.stringContaining('Invalid Redis URL')]);
      expect(run.stderr).not.toContain('s3c');
    }
    const cursor = await runCli(['locks', 'list', '--cursor', 'n0.99999999999999999999.0']);
    expect([cursor.code, cursor.stderr]).toEqual([1, expect.stringContaining('Invalid cursor')]);
  });

  it('a database the server refuses, or that is not a number, fails the command: nothing in database 0 is touched', async () => {
    const redis = redisClient();
    const prefix = uniqueName('cli-db');
    const lock = runningKey(prefix, `v1:${'ab'.repeat(32)}`);
    await redis.zadd(lock, String(Date.now()), 'job-1');
    const base = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    try {
      const release = ['locks', 'release', `v1:${'ab'.repeat(32)}`, '--yes', '--prefix', prefix];
      const refused = await runCli([...release, '--redis', `${base}/99`], { connect: false });
      expect([refused.code, refused.stderr]).toEqual([
        1,
        expect.stringMatching(/^unique-jobs: Redis refused database 99: ERR DB index is out of range\n$/),
      ]);
      const word = await runCli([...release, '--redis', `${base}/2abc`], { connect: false });
      expect([word.code, word.stderr]).toEqual([
        1,
        'unique-jobs: Invalid Redis URL: the database must be a number, as in redis://127.0.0.1:6379/2\n',
      ]);
      expect(await redis.zrange(lock, '0', '-1')).toEqual(['job-1']);
    } finally {
      await redis.del(lock);
      await redis.quit();
    }
  });

  it('output cut off by its reader (`| head -1`): the command ends as it would, without an EPIPE trace', async () => {
    const run = await runCli(['locks', 'list', '--prefix', uniqueName('cli-pipe')], { closeStdout: true });
    expect([run.code, run.stderr]).toEqual([0, '']);
  });

  it('rejects a prefix that is not a plain key part', async () => {
    const run = await runCli(['locks', 'list', '--prefix', 'a*b']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('--prefix may hold letters, digits');
  });
});
