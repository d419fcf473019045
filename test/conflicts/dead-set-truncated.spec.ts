// A rejected duplicate whose entry JSON is over `deadSet.maxEntryBytes` is kept truncated: its metadata, its original
// size and the sha256 of the dropped payload, no data or options; a warning says so; `retry` fails with
// TruncatedDeadSetEntryError and leaves the entry where it was (also from the CLI and the admin API); and the
// `deadSet` bounds are validated at bootstrap.
import { createHash } from 'node:crypto';
import { describe, expect, it, jest } from '@jest/globals';
import { DeadSetService, TruncatedDeadSetEntryError, UniqueJobsError, type DeadSetEntry } from '../../lib/index.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { csrfOf, http, OPS, startAdminApp } from '../admin/admin-app.js';
import { runCli } from '../cli/run-cli.js';
import { useApps } from '../support/apps.js';
import { bootstrapError, invalidOptions } from '../support/bootstrap.js';
import { asDuplicate } from '../support/locks.js';
import { deleteKeys, scanKeys, uniqueName } from '../support/redis.js';
import { clientSide } from './helpers.js';

jest.setTimeout(60_000);

describe('truncated dead-set entries', () => {
  const { redis, start, onCleanup } = useApps('deadt', clientSide('reject'));

  it('stores an oversized entry without its payload, says so, and refuses to retry it', async () => {
    const prefix = uniqueName('ujdt');
    onCleanup(async () => deleteKeys(redis, await scanKeys(redis, `${prefix}:*`)));
    const warnings: string[] = [];
    const requeued: string[] = [];
    const deadSet = new DeadSetService(
      redis,
      new RedisScripts(redis),
      new UniqueJobsKeys(prefix),
      { maxSize: 100, maxAge: 60_000, maxBytes: 1_000_000, maxEntryBytes: 5_000 },
      async (entry) => {
        requeued.push(entry.id);
        throw new Error('not expected');
      },
      { warn: (message) => void warnings.push(message) },
    );
    const input = {
      queue: 'payments',
      jobName: 'settle',
      data: { eventId: 'evt_1', note: 'é'.repeat(4_000) }, // 8,000 bytes of UTF-8, 4,000 characters
      opts: { attempts: 3 },
      digest: `v1:${'ab'.repeat(32)}`,
      existingJobId: '7',
      side: 'client' as const,
      reason: 'Rejected a duplicate',
    };
    const small = await deadSet.add({ ...input, data: { eventId: 'evt_0' } });
    const id = await deadSet.add(input);

    const stored = (await deadSet.get(id))!;
    const { data: _data, opts: _opts, ...metadata } = { ...input, id, rejectedAt: stored.rejectedAt };
    const full = JSON.stringify({ ...input, id, rejectedAt: stored.rejectedAt });
    expect(stored).toEqual({
      ...metadata,
      truncated: true,
      originalBytes: Buffer.byteLength(full),
      payloadSha256: createHash('sha256')
        .update(JSON.stringify({ data: input.data, opts: input.opts }))
        .digest('hex'),
    } satisfies DeadSetEntry);
    expect(stored.originalBytes).toBeGreaterThan(8_000);
    expect(await redis.hstrlen(`${prefix}:{dead}:entries`, id)).toBeLessThan(1_000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(id);
    expect(warnings[0]).toContain('over deadSet.maxEntryBytes (5000)');
    expect(warnings[0]).toContain('stored without its data and options');
    expect(warnings[0]).toContain(stored.payloadSha256);

    const before = await deadSet.list();
    expect(before.map((entry) => entry.id)).toEqual([id, small]);
    const error = await deadSet.retry(id).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TruncatedDeadSetEntryError);
    expect(error).toBeInstanceOf(UniqueJobsError);
    expect(error).toMatchObject({ entryId: id, originalBytes: stored.originalBytes });
    expect((error as Error).message).toContain(`Cannot retry dead-set entry ${id}`);
    expect((error as Error).message).toContain('deadSet.maxEntryBytes');
    expect(requeued).toEqual([]);
    expect(await deadSet.list()).toEqual(before); // still there, in the same place
    expect(await deadSet.bytes()).toBe(
      (await redis.hstrlen(`${prefix}:{dead}:entries`, id)) + (await redis.hstrlen(`${prefix}:{dead}:entries`, small)),
    );
    expect(await deadSet.delete(id)).toBe(true);
    expect(await deadSet.delete(small)).toBe(true);
    expect(await scanKeys(redis, `${prefix}:*`)).toEqual([]);
  });

  it('through the app: a duplicate over maxEntryBytes is kept truncated; retry throws and keeps it; the CLI refuses', async () => {
    const app = await start({ module: { deadSet: { maxEntryBytes: 10_000 } } });
    await app.queue.add('job', { id: 'a', n: 0 });
    const big = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 1, blob: 'q'.repeat(20_000) }));
    const fits = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'a', n: 2 }));

    const entry = (await app.service.deadSet.get(big.deadSetEntryId!))!;
    expect(entry).toMatchObject({ truncated: true, queue: app.queue.name, jobName: 'job', digest: big.digest });
    expect(entry.data).toBeUndefined();
    expect(entry.opts).toBeUndefined();
    expect(entry.originalBytes).toBeGreaterThan(20_000);
    expect(entry.payloadSha256).toMatch(/^[0-9a-f]{64}$/);
    expect((await app.service.deadSet.get(fits.deadSetEntryId!))?.data).toEqual({ id: 'a', n: 2 });

    await expect(app.service.deadSet.retry(big.deadSetEntryId!)).rejects.toThrow(TruncatedDeadSetEntryError);
    expect(await app.service.deadSet.get(big.deadSetEntryId!)).toEqual(entry);
    expect((await app.service.deadSet.list()).map((e) => e.id)).toEqual([fits.deadSetEntryId, big.deadSetEntryId]);

    const cli = await runCli(['dead', 'retry', big.deadSetEntryId!, '--prefix', app.prefix]);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('stored without its data and options');
    expect(await app.service.deadSet.get(big.deadSetEntryId!)).toEqual(entry);
    const shown = await runCli(['dead', 'delete', big.deadSetEntryId!, '--prefix', app.prefix]);
    expect(shown.stdout).toContain(`(not stored: ${entry.originalBytes} bytes, over deadSet.maxEntryBytes`);
  });

  it('through the admin API: retrying a truncated entry answers 409 and keeps it', async () => {
    const queue = uniqueName('admdt');
    const admin = await startAdminApp({
      queues: [{ queue, paused: true, unique: { lock: 'until_executed', onConflict: 'reject', lockArgs: byId } }],
      module: { deadSet: { maxEntryBytes: 2_000 } },
    });
    try {
      await admin.service.enqueue(admin.queue(queue), 'charge', { id: 'o1' });
      const dup = asDuplicate(
        await admin.service.enqueue(admin.queue(queue), 'charge', { id: 'o1', x: 'w'.repeat(5000) }),
      );
      const csrf = await csrfOf(admin);
      const answer = await http(`${admin.adminUrl}/api/dead/${dup.deadSetEntryId}/retry`, {
        method: 'POST',
        headers: { authorization: OPS, 'x-csrf-token': csrf.token, cookie: csrf.cookie },
      });
      expect(answer.status).toBe(409);
      expect((answer.json as { message: string }).message).toContain('stored without its data and options');
      expect((await admin.service.deadSet.get(dup.deadSetEntryId!))?.truncated).toBe(true);
      const page = await http(`${admin.adminUrl}/dead`, { headers: { authorization: OPS, accept: 'text/html' } });
      expect(page.text).toContain('Not stored:');
      expect(page.text).not.toContain(`data-retry="${dup.deadSetEntryId}"`);
      expect(page.text).toContain(`data-delete="${dup.deadSetEntryId}"`);
    } finally {
      await admin.close();
    }
  });
});

describe('deadSet bounds validation', () => {
  const bad: [Record<string, unknown>, string, string][] = [
    [{ maxBytes: 0 }, 'deadSet.maxBytes', 'must be an integer ≥ 1024 and ≤ 9007199254740991 (got 0)'],
    [{ maxEntryBytes: 1.5 }, 'deadSet.maxEntryBytes', 'must be an integer ≥ 1024'],
    [{ maxBytes: '64mb' }, 'deadSet.maxBytes', 'must be an integer ≥ 1'],
    [{ maxEntryBytes: -1 }, 'deadSet.maxEntryBytes', 'must be an integer ≥ 1'],
    [{ maxBytes: Number.MAX_SAFE_INTEGER + 2 }, 'deadSet.maxBytes', '≤ 9007199254740991'],
    [
      { maxEntryBytes: 1023 },
      'deadSet.maxEntryBytes',
      'must be an integer ≥ 1024 and ≤ 9007199254740991 (got 1023): a truncated entry alone takes a few hundred bytes',
    ],
    [{ maxBytes: 300 }, 'deadSet.maxBytes', 'must be an integer ≥ 1024'],
    [{ maxSize: 0 }, 'deadSet.maxSize', 'must be an integer ≥ 1 and'],
    [{ maxbytes: 10 }, 'deadSet.maxbytes', 'is not an option; valid: maxSize, maxAge, maxBytes, maxEntryBytes'],
  ];
  it.each(bad)('refuses %j', async (deadSet, option, message) => {
    const error = await invalidOptions({ queues: [uniqueName('val')], module: { deadSet } });
    expect(error.source).toBe('UniqueJobsModule.forRoot');
    expect(error.option).toBe(option);
    expect(error.message).toContain(message);
  });

  it('accepts the extremes', async () => {
    const deadSet = { maxBytes: Number.MAX_SAFE_INTEGER, maxEntryBytes: 1024, maxSize: 1, maxAge: 1 };
    expect(await bootstrapError({ queues: [uniqueName('val')], module: { deadSet } })).toBeUndefined();
  });
});

function byId(data: { id: string }): string {
  return data.id;
}
