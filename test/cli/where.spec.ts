// Every "nothing found" answer of the `unique-jobs` CLI says where it looked (the library prefix, the BullMQ prefix, the
// queues, the idempotency store) and offers the prefixes that do hold the library's keys, found by a bounded SCAN. Run
// as a child process (the built executable) against locks, records and dead-set entries a real app left in Redis, asked
// for with a wrong --prefix or --bull-prefix; the budget case on a redis-server of its own, whose key space is known.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Elsewhere } from '../../lib/ops/cli/where.js';
import { useApps } from '../support/apps.js';
import { PrivateRedis } from '../support/private-redis.js';
import { asDuplicate, byId, dedupKey, digestOf, queuedKey } from '../support/locks.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { runCli, runCliJson } from './run-cli.js';

jest.setTimeout(120_000);

// The shared Redis may hold many keys of other clients (hundreds of thousands, during another run's benchmark): the
// survey for other prefixes gets the budget to read all of them, so that it finds the app's keys wherever SCAN has them.
const WHOLE_SPACE = ['--max-scans', '100000'];
const cli = (args: readonly string[]) => runCli([...args, ...WHOLE_SPACE]);
const cliJson = <T>(args: readonly string[]) => runCliJson<T>([...args, ...WHOLE_SPACE]);
/** The ready command of a match under `prefix` (its other words are the command's own). */
const rerunOf = (prefix: string) => expect.stringMatching(new RegExp(`^unique-jobs .*--prefix ${prefix}( |$)`));

type Searched = { redis: string; prefix: string; bullPrefix: string; queues: string[]; keys: string[] };
type Answer = { searched: Searched; elsewhere: Elsewhere };

describe('unique-jobs: where a "nothing found" answer looked, and where the keys are', () => {
  const { start } = useApps('cli-where', { paused: true });
  /** A prefix nothing was ever written under. */
  const wrong = () => uniqueName('ujt-wrong');

  it('locks show / release under a wrong --prefix: names the keys searched and finds the lock under its prefix', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    await app.queue.add('job', { id: 'a' });
    const digest = digestOf(app, 'job', { id: 'a' });
    const key = queuedKey(app.prefix, digest);
    const prefix = wrong();

    const human = await cli(['locks', 'show', digest, '--prefix', prefix]);
    expect(human.code).toBe(0);
    const [first, ...rest] = human.stdout.trimEnd().split('\n');
    expect(first).toContain(`No lock is held for ${digest} under prefix "${prefix}" (${prefix}:{v1:`);
    expect(first).toContain('}:queued|expiring|running) nor in the deduplication keys');
    expect(first).toContain(`under BullMQ prefix "${bullPrefix()}", on redis://`);
    expect(rest).toContain(`Found elsewhere: ${key} (run again with --prefix ${app.prefix}).`);
    // The next line is the command to run again, ready to paste: run as printed, it finds the lock.
    const again = rest[rest.indexOf(`Found elsewhere: ${key} (run again with --prefix ${app.prefix}).`) + 1];
    expect(again).toMatch(new RegExp(`^  unique-jobs locks show ${digest} .*--prefix ${app.prefix}( |$)`));
    const rerun = await runCli(again.trim().split(' ').slice(1), { connect: false });
    expect(rerun.code).toBe(0);
    expect(rerun.stdout).toContain(key);
    expect(rerun.stdout).not.toContain('No lock is held');
    expect(rest.join('\n')).toMatch(new RegExp(`prefixes holding locks: .*"${app.prefix}" \\(1 key\\)`));

    const json = await cliJson<Answer & { locks: unknown[] }>(['locks', 'show', digest, '--prefix', prefix]);
    expect(json.code).toBe(0);
    expect(json.json.locks).toEqual([]);
    expect(json.json.searched).toMatchObject({ prefix, bullPrefix: bullPrefix() });
    expect(json.json.searched.queues).toContain(app.queue.name);
    expect(json.json.searched.keys).toEqual(
      expect.arrayContaining([
        `${prefix}:{${digest}}:queued`,
        `${prefix}:{${digest}}:expiring`,
        `${prefix}:{${digest}}:running`,
        dedupKey(app.queue.name, digest),
      ]),
    );
    expect(json.json.elsewhere.matches).toEqual([
      { key, rerunWith: `--prefix ${app.prefix}`, command: rerunOf(app.prefix) },
    ]);
    expect(json.json.elsewhere.lockPrefixes).toContainEqual({ prefix: app.prefix, keys: 1 });
    expect(json.json.elsewhere.lockPrefixes?.some((entry) => entry.prefix === prefix)).toBe(false);

    for (const yes of [[], ['--yes']]) {
      const release = await cliJson<Answer & { released: number }>([
        'locks',
        'release',
        digest,
        '--prefix',
        prefix,
        ...yes,
      ]);
      expect(release.json).toMatchObject({ released: 0, searched: { prefix } });
      expect(release.json.elsewhere.matches).toEqual([
        { key, rerunWith: `--prefix ${app.prefix}`, command: rerunOf(app.prefix) },
      ]);
      const text = await cli(['locks', 'release', digest, '--prefix', prefix, ...yes]);
      expect(text.stdout).toContain(`Nothing to release: no lock is held for ${digest} under prefix "${prefix}"`);
      expect(text.stdout).toContain(`Found elsewhere: ${key} (run again with --prefix ${app.prefix}).`);
    }
  });

  it('locks show under a wrong --bull-prefix: says no queue is there and finds the deduplication key', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId } });
    await app.queue.add('job', { id: 'a' });
    const digest = digestOf(app, 'job', { id: 'a' });
    const bull = uniqueName('nobull');

    const human = await cli(['locks', 'show', digest, '--prefix', app.prefix, '--bull-prefix', bull]);
    expect(human.stdout).toContain(
      `nor in any queue's deduplication keys: no queue under BullMQ prefix "${bull}" (no ${bull}:<queue>:meta key)`,
    );
    expect(human.stdout).toContain(
      `Found elsewhere: ${dedupKey(app.queue.name, digest)} (run again with --bull-prefix ${bullPrefix()}).`,
    );
    expect(human.stdout).toContain(
      `\n  unique-jobs locks show ${digest} --redis ${process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'} --prefix ${app.prefix} --bull-prefix ${bullPrefix()} --max-scans 100000\n`,
    );
    const json = await cliJson<Answer>(['locks', 'show', digest, '--prefix', app.prefix, '--bull-prefix', bull]);
    expect(json.json.searched).toMatchObject({ prefix: app.prefix, bullPrefix: bull, queues: [] });
    expect(json.json.elsewhere.queues).toContainEqual({ bullPrefix: bullPrefix(), queue: app.queue.name, keys: 1 });
    expect(json.json.elsewhere.deduplicationQueues).toContainEqual({
      bullPrefix: bullPrefix(),
      queue: app.queue.name,
      keys: 1,
    });

    // A --queue that is not under the BullMQ prefix: the error names the prefix it is under.
    const queue = await cli(['locks', 'list', '--queue', app.queue.name, '--bull-prefix', bull, '--json']);
    expect(queue.code).toBe(1);
    const error = (JSON.parse(queue.stderr) as { error: { message: string } & Answer }).error;
    expect(error.message).toContain(
      `a queue "${app.queue.name}" exists under BullMQ prefix "${bullPrefix()}": run again with --bull-prefix ${bullPrefix()} (unique-jobs locks list `,
    );
    expect(error.searched).toMatchObject({ bullPrefix: bull, queues: [] });
    expect(error.elsewhere.queues).toEqual([{ bullPrefix: bullPrefix(), queue: app.queue.name, keys: 1 }]);
  });

  it('locks list with nothing held: the filter, the keys scanned and the prefixes that hold locks', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    await app.queue.add('job', { id: 'a' });
    const prefix = wrong();

    const human = await cli(['locks', 'list', '--kind', 'runtime', '--prefix', prefix]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(
      `No locks matching kind runtime held under prefix "${prefix}" (${prefix}:{v1:…}:running), on redis://`,
    );
    expect(human.stdout).toMatch(new RegExp(`prefixes holding locks: .*"${app.prefix}" \\(1 key\\)`));
    const json = await cliJson<Answer & { locks: unknown[]; cursor: string }>([
      'locks',
      'list',
      '--prefix',
      prefix,
      '--queue',
      app.queue.name,
    ]);
    expect(json.json).toMatchObject({ locks: [], cursor: '0', searched: { prefix, queues: [app.queue.name] } });
    expect(json.json.searched.keys).toEqual([
      `${prefix}:{<digest>}:queued|expiring|running`,
      `${bullPrefix()}:<queue>:de:uj:<digest>`,
    ]);
    expect(json.json.elsewhere).toMatchObject({ complete: true, matches: [] });
    expect(json.json.elsewhere.lockPrefixes).toContainEqual({ prefix: app.prefix, keys: 1 });
  });

  it('keys show: names the Redis store and key searched, says SQL stores are not visible, finds the prefix', async () => {
    const app = await start({
      paused: false,
      idempotency: { key: (job) => (job.data as { orderId: string }).orderId },
    });
    const job = await app.queue.add('charge', { orderId: "o'1" });
    await app.finished(job);
    const prefix = wrong();
    const args = ['keys', 'show', "o'1", '--queue', app.queue.name, '--name', 'charge', '--prefix', prefix];

    const human = await cli(args);
    expect(human.code).toBe(0);
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      new RegExp(
        `^No live record for key o'1 in scope ${app.queue.name}:charge in the Redis idempotency store under prefix "${prefix}" \\(key ${prefix}:\\{[\\w-]{43}\\}:idempotency\\), on redis://`,
      ),
    );
    expect(lines[1]).toContain('kept in a SQL store');
    expect(lines[1]).toContain('are not visible to this CLI: query table unique_jobs_idempotency');
    expect(lines[2]).toBe(
      `  SELECT * FROM unique_jobs_idempotency WHERE scope = '${app.queue.name}:charge' AND key = 'o''1';`,
    );
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^Found elsewhere: ${app.prefix}:\\{`)));
    expect(lines).toContainEqual(expect.stringContaining(`(run again with --prefix ${app.prefix}).`));

    const json = await cliJson<Answer & { found: boolean; notSearched: { store: string; query: string }[] }>(args);
    expect(json.json).toMatchObject({
      found: false,
      record: null,
      searched: { store: 'redis', prefix, keys: [expect.stringMatching(/:idempotency$/)] },
      notSearched: [{ store: 'sql', table: 'unique_jobs_idempotency' }],
    });
    expect(json.json.elsewhere.matches).toEqual([
      {
        key: expect.stringMatching(new RegExp(`^${app.prefix}:\\{`)),
        rerunWith: `--prefix ${app.prefix}`,
        command: rerunOf(app.prefix),
      },
    ]);
    expect(json.json.elsewhere.idempotencyPrefixes).toContainEqual({ prefix: app.prefix, keys: 1 });
  });

  it('dead list / retry / delete under a wrong --prefix: the dead set searched, the one that holds the entry', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' } });
    await app.queue.add('job', { id: 'a' });
    const id = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 })).deadSetEntryId!;
    const prefix = wrong();
    const entries = `${app.prefix}:{dead}:entries`;

    const list = await cliJson<Answer & { size: number }>(['dead', 'list', '--prefix', prefix]);
    expect(list.json).toMatchObject({
      size: 0,
      searched: { prefix, keys: [`${prefix}:{dead}:index`, `${prefix}:{dead}:entries`] },
    });
    expect(list.json.elsewhere.deadSetPrefixes).toContainEqual({ prefix: app.prefix, keys: 1, entries: 1 });
    const listText = await cli(['dead', 'list', '--prefix', prefix]);
    expect(listText.stdout).toMatch(new RegExp(`prefixes holding a dead set: .*"${app.prefix}" \\(1 entry\\)`));

    for (const command of ['retry', 'delete']) {
      const run = await cli(['dead', command, id, '--prefix', prefix]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        `unique-jobs: No dead-set entry ${id} in the dead set under prefix "${prefix}" (${prefix}:{dead}:entries), on redis://`,
      );
      expect(run.stderr).toContain(`Found elsewhere: ${entries} (run again with --prefix ${app.prefix}).`);
      const json = await cli(['dead', command, id, '--prefix', prefix, '--json']);
      const error = (JSON.parse(json.stderr) as { error: Answer & { exitCode: number } }).error;
      expect(error).toMatchObject({ exitCode: 1, searched: { prefix } });
      expect(error.elsewhere.matches).toEqual([
        { key: entries, rerunWith: `--prefix ${app.prefix}`, command: rerunOf(app.prefix) },
      ]);
    }
    expect(await app.service.deadSet.get(id)).toBeDefined();
  });

  it('reap: says what it searched, and the prefixes holding locks when it found nothing', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    await app.queue.add('job', { id: 'a' });
    const prefix = wrong();
    const json = await cliJson<Answer & { complete: boolean }>(['reap', '--dry-run', '--prefix', prefix]);
    expect(json.json).toMatchObject({ complete: true, searched: { prefix, bullPrefix: bullPrefix() } });
    expect(json.json.elsewhere.lockPrefixes).toContainEqual({ prefix: app.prefix, keys: 1 });
    const human = await cli(['reap', '--dry-run', '--prefix', prefix]);
    expect(human.stdout).toContain(`Searched: prefix "${prefix}" (locks and idempotency claims in Redis)`);
  });
});

describe('unique-jobs: the survey for other prefixes is bounded', () => {
  let redis: PrivateRedis;
  const run = (...args: string[]) => runCli([...args, '--redis', redis.url], { connect: false });

  beforeAll(async () => {
    redis = await PrivateRedis.start();
    // 3,000 keys that are not the library's: more than one SCAN call returns.
    const filler = redis.admin.pipeline();
    for (let i = 0; i < 3000; i++) filler.set(`other-app:item:${i}`, '1');
    await filler.exec();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('says "none found in the first N keys scanned" when the budget ran out, and how much it scanned', async () => {
    const cut = await run('locks', 'list', '--max-scans', '1', '--json');
    expect(cut.code).toBe(0);
    const { elsewhere } = JSON.parse(cut.stdout) as Answer;
    expect(elsewhere).toMatchObject({ scanCalls: 1, maxScans: 1, complete: false, lockPrefixes: [] });
    expect(elsewhere.scannedKeys).toBeGreaterThan(0);
    expect(elsewhere.scannedKeys).toBeLessThan(3000);
    const text = await run('locks', 'list', '--max-scans', '1');
    expect(text.stdout).toContain(
      `No other prefix holding locks: none found in the first ${elsewhere.scannedKeys} keys scanned (the scan stopped after 1 SCAN calls; raise --max-scans to look further).`,
    );

    // With the default budget the whole (small) key space is scanned, and a lock added at the end is found.
    await redis.admin.zadd(`late:{v1:${'a'.repeat(64)}}:queued`, Date.now() + 60_000, 'job-1');
    const whole = JSON.parse((await run('locks', 'list', '--json')).stdout) as Answer;
    expect(whole.elsewhere).toMatchObject({ complete: true, lockPrefixes: [{ prefix: 'late', keys: 1 }] });
    expect(whole.elsewhere.scannedKeys).toBe(3001);
    expect(whole.elsewhere.scanCalls).toBeLessThanOrEqual(50);
    const none = await run('keys', 'show', 'k', '--scope', 's');
    expect(none.stdout).toContain('No other prefix holds idempotency records (all 3001 keys scanned).');
    const bad = await run('locks', 'list', '--max-scans', '0');
    expect(bad.stderr).toContain('--max-scans must be an integer from 1 to 100000');
  });
});
