// Found by a hostile review (session 26): `locks release <d1> <d2> --yes` released d1 only and `dead delete <id1>
// <id2> --yes` deleted id1 only, both exiting 0: a script passing several ids believed all were handled. Every command
// now refuses a positional argument past those it takes (exit 1, usage), before it changes anything.
import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { asDuplicate, byId, dedupKey, digestOf } from '../support/locks.js';
import { runCli } from './run-cli.js';

describe('unique-jobs: a positional argument too many is refused, nothing changed', () => {
  const { redis, start } = useApps('cliextra', {
    unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
    paused: true,
  });

  it('locks release <d1> <d2> --yes: exit 1, both locks held', async () => {
    const app = await start();
    await app.queue.add('job', { id: 'a' });
    await app.queue.add('job', { id: 'b' });
    const [dA, dB] = [digestOf(app, 'job', { id: 'a' }), digestOf(app, 'job', { id: 'b' })];
    const run = await runCli(['locks', 'release', dA, dB, '--yes', '--prefix', app.prefix]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`Unexpected argument "${dB}"`);
    expect(await redis.get(dedupKey(app.queue.name, dA))).not.toBeNull();
    expect(await redis.get(dedupKey(app.queue.name, dB))).not.toBeNull();
  });

  it.each(['delete', 'retry'])('dead %s <id1> <id2> --yes: exit 1, both entries kept', async (sub) => {
    const app = await start();
    await app.queue.add('job', { id: 'a' });
    const e1 = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1 })).deadSetEntryId!;
    const e2 = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 })).deadSetEntryId!;
    const run = await runCli(['dead', sub, e1, e2, '--yes', '--prefix', app.prefix]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`Unexpected argument "${e2}"`);
    expect(await app.service.deadSet.get(e1)).toBeDefined();
    expect(await app.service.deadSet.get(e2)).toBeDefined();
  });

  it.each([
    [['dead', 'list', 'extra']],
    [['keys', 'show', 'order-1', 'order-2', '--scope', 'payments']],
    [['locks', 'show', 'v1:' + '0'.repeat(64), 'extra']],
    [['locks', 'list', '*', 'extra']],
  ])('%j: exit 1, "Unexpected argument"', async (args) => {
    const app = await start();
    const run = await runCli([...args, '--prefix', app.prefix]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Unexpected argument');
  });
});
