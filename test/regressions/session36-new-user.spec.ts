// Session 36, a new user's walk through the README: `keys show --queue --name` of a record whose queue lives under a
// BullMQ prefix of its own. The default scope is led by that prefix, so without `--bull-prefix` the CLI looks under
// another scope: it said "No live record … No other prefix holds idempotency records", with no word of the prefix,
// while `locks list --queue` of the same queue names the prefix to run again with.
import { afterAll, describe, expect, it, jest } from '@jest/globals';
import { Queue } from 'bullmq';
import { defaultIdempotencyScope, normalizeIdempotencyScope } from '../../lib/idempotency/stored-key.js';
import { RedisIdempotencyStore } from '../../lib/idempotency/stores/redis-idempotency.store.js';
import { runCli } from '../cli/run-cli.js';
import { deleteKeys, onCluster, redisClient, redisOptions, scanKeys, uniqueName } from '../support/redis.js';

jest.setTimeout(60_000);

// A Cluster run gives the CLI `--cluster` and the `{bull}` prefix of its own (test/cli/run-cli.ts): single Redis only.
const describeSingle = onCluster ? describe.skip : describe;

describeSingle('session 36: keys show --queue of a queue under a BullMQ prefix of its own', () => {
  const client = redisClient();
  const bull = uniqueName('s36bull');
  const prefix = uniqueName('s36uj');
  const queueName = uniqueName('s36pay');

  afterAll(async () => {
    await deleteKeys(client, [...(await scanKeys(client, `${bull}:*`)), ...(await scanKeys(client, `${prefix}:*`))]);
    await client.quit();
  });

  it('finds the record under the scope --bull-prefix would build, and prints the command to run again', async () => {
    const queue = new Queue(queueName, { connection: redisOptions(), prefix: bull });
    await queue.waitUntilReady();
    await queue.add('settle', { eventId: 'evt_1' }); // the queue's meta key: how the CLI finds a queue
    await queue.close();
    const store = new RedisIdempotencyStore({ client, prefix });
    const scope = normalizeIdempotencyScope(defaultIdempotencyScope({ queueName, name: 'settle', prefix: bull }));
    expect(scope).toBe(`:${bull}:${queueName}:settle`);
    const ref = { scope, key: 'evt_1', owner: 'owner-1' };
    expect((await store.claim({ ...ref, leaseMs: 30_000, fingerprint: undefined, jobId: '1' })).claimed).toBe(true);
    expect(await store.complete(ref, { result: '{"settled":"evt_1"}', ttlMs: 60_000 })).toBe(true);

    const args = ['keys', 'show', 'evt_1', '--queue', queueName, '--name', 'settle', '--prefix', prefix];
    const human = await runCli(args);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`No live record for key evt_1 in scope ${queueName}:settle`);
    expect(human.stdout).toContain(
      `Found elsewhere: ${store.recordKey(scope, 'evt_1')} (run again with --bull-prefix ${bull}).`,
    );
    expect(human.stdout).toMatch(new RegExp(`queues under other BullMQ prefixes: .*"${bull}" \\(${queueName}\\)`));
    const command = human.stdout.split('\n').find((line) => line.startsWith('  unique-jobs keys show evt_1 '));
    expect(command).toContain(`--bull-prefix ${bull}`);
    const again = await runCli(command!.trim().split(' ').slice(1), { connect: false });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`Scope       :${bull}:${queueName}:settle`);
    expect(again.stdout).toContain('State       completed');
    // Every value starts in one column: "Fingerprint" (longer than the others) and "Kept until" were out of it.
    const rows = again.stdout.trimEnd().split('\n');
    expect(rows.map((row) => row.slice(0, 12).trimEnd())).toEqual([
      'Key',
      'Scope',
      'Matched',
      'State',
      'Job',
      'Attempts',
      'Created',
      'Kept until',
      'Fingerprint',
      'Result',
    ]);
    expect(rows.every((row) => row[11] === ' ' && row[12] !== ' ')).toBe(true);

    const json = await runCli([...args, '--json']);
    const answer = JSON.parse(json.stdout) as {
      found: boolean;
      elsewhere: { matches: { rerunWith: string }[]; queues: { bullPrefix: string; queue: string }[] };
    };
    expect(answer.found).toBe(false);
    expect(answer.elsewhere.matches).toEqual([expect.objectContaining({ rerunWith: `--bull-prefix ${bull}` })]);
    expect(answer.elsewhere.queues).toContainEqual(expect.objectContaining({ bullPrefix: bull, queue: queueName }));

    // Given by --scope, the scope names no queue: nothing of the queues is added.
    const byScope = await runCli(['keys', 'show', 'evt_1', '--scope', `${queueName}:settle`, '--prefix', prefix]);
    expect(byScope.stdout).not.toContain('Found elsewhere');
    expect(byScope.stdout).not.toContain('queues under other BullMQ prefixes');
  });
});
