// The queue registry (`<prefix>:{queues}:known`) can miss a queue that holds the library's locks: one only a process of
// an older version uses (here: the record is taken out, as such a process never writes it), or one whose recording
// failed at bootstrap in a process that has enqueued nothing since.
// So the CLI scans for queues by default: `locks list`, `locks show` and `dead retry` find such a queue's lock and
// dead-set entry (found by the session-9 review, when the CLI trusted the registry).
import { describe, expect, it, jest } from '@jest/globals';
import { Queue } from 'bullmq';
import { defineUniqueJob, type HeldLock } from '../../lib/index.js';
import { runCli, runCliJson } from '../cli/run-cli.js';
import { useApps } from '../support/apps.js';
import { asDuplicate, byId, dedupKey } from '../support/locks.js';
import { bullOptions, bullPrefix, deleteKeys, scanKeys, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

jest.setTimeout(120_000);

type Listing = { locks: HeldLock[]; cursor: string; searched?: { queues: string[] } };

describe('CLI over an incomplete queue registry', () => {
  const { redis, start, onCleanup } = useApps('rvreg', {
    unique: { lock: 'until_executed', lockArgs: byId },
    paused: true,
  });

  it('finds a lock, and retries a dead-set entry, of a queue the registry does not name', async () => {
    const otherName = uniqueName('rvreg-b');
    const app = await start({
      module: {
        jobs: [defineUniqueJob({ queue: otherName, lock: 'until_executed', onConflict: 'reject' })],
      },
    });
    const other = new Queue(otherName, bullOptions());
    onCleanup(async () => {
      await other.obliterate({ force: true }).catch(() => undefined);
      await other.close();
      await deleteKeys(redis, await scanKeys(redis, `${bullPrefix()}:${otherName}:*`));
    });
    // The app's own queue is recorded; the other one holds a fast-path lock and a dead-set entry under the same prefix.
    await app.queue.add('job', { id: 'own' });
    const held = await app.service.enqueue(other, 'job', { id: 'x' });
    expect(held.status).toBe('enqueued');
    const dup = asDuplicate(await app.service.enqueue(other, 'job', { id: 'x' }));
    const digest = app.service.digestOf(otherName, 'job', { id: 'x' })!;
    expect(await redis.exists(dedupKey(otherName, digest))).toBe(1);
    expect(await redis.exists(`${bullPrefix()}:${otherName}:meta`)).toBe(1);
    // This process records the queue at its first enqueue (not waited for); a process of an older version would not.
    const registry = `${app.prefix}:{queues}:known`;
    await waitFor(
      'the queue record',
      async () => (await redis.sismember(registry, `${bullPrefix()}:${otherName}`)) === 1,
    );
    expect(await redis.srem(registry, `${bullPrefix()}:${otherName}`)).toBe(1);
    expect(await redis.smembers(registry)).toEqual([`${bullPrefix()}:${app.queue.name}`]);

    const scoped = (...args: string[]) => [...args, '--prefix', app.prefix];
    const listed = await runCliJson<Listing>(scoped('locks', 'list'));
    const shown = await runCli(scoped('locks', 'show', digest));
    const retried = await runCli(scoped('dead', 'retry', dup.deadSetEntryId!));

    // The other queue is searched: its lock is listed and shown, and its dead-set entry is retried (refused as a
    // duplicate, exit 1, since its lock is still held), not failed as a queue that does not exist.
    expect(listed.json.searched?.queues).toContain(otherName);
    expect(listed.json.locks.map((lock) => lock.queue)).toContain(otherName);
    expect(shown.stdout).toContain(`queue  ${otherName}`);
    expect(shown.stdout).not.toContain(`no ${bullPrefix()}:${otherName}:meta key`);
    expect(retried.code).toBe(1);
    expect(retried.stderr).not.toContain('is not under the BullMQ prefix');
  });
});
