// One rule turns an idempotency key or scope into its stored form (normalizeIdempotencyKey / normalizeIdempotencyScope),
// used by @IdempotencyKey, the admin page's lookup and the CLI's `keys show`, so each finds what the others wrote. The
// raw and the hashed spaces are disjoint: a raw key that starts with "sha256:" is hashed; a key a store cannot hold
// (NUL, lone surrogate) is hashed with a NUL in front of its JSON text, so no plain key hashes to the same input. A long
// scope is hashed like a long key. Real Redis and PostgreSQL.
import { createHash } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  MAX_IDEMPOTENCY_KEY_LENGTH,
  normalizeIdempotencyKey,
  normalizeIdempotencyScope,
  PostgresIdempotencyStore,
  RedisIdempotencyStore,
  type AdminKeyLookup,
} from '../../lib/index.js';
import { http, OPS, startAdminApp, type AdminTestApp } from '../admin/admin-app.js';
import { runCli, runCliJson } from '../cli/run-cli.js';
import { useApps } from '../support/apps.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { uniqueName } from '../support/redis.js';

const sha256 = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;

describe('normalizeIdempotencyKey / normalizeIdempotencyScope', () => {
  it('keeps ordinary keys, hashes long, "sha256:"-prefixed and unstorable ones, in disjoint spaces', () => {
    const atLimit = 'k'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH);
    const long = `${atLimit}!`;
    expect(normalizeIdempotencyKey('evt_1')).toBe('evt_1');
    expect(normalizeIdempotencyKey(atLimit)).toBe(atLimit);
    // Stored forms of existing long keys are unchanged.
    expect(normalizeIdempotencyKey(long)).toBe(sha256(long));
    // A raw key that looks like a stored hash is hashed itself: it never meets the key it looks like.
    const lookalike = sha256(long);
    expect(normalizeIdempotencyKey(lookalike)).toBe(sha256(lookalike));
    expect(normalizeIdempotencyKey(lookalike)).not.toBe(normalizeIdempotencyKey(long));
    expect(normalizeIdempotencyKey('sha256:')).toBe(sha256('sha256:'));
    // NUL and lone surrogates: hashed with a domain separator; the JSON text of such a key, as a plain (long) key, is
    // another record.
    const nul = `evt\u0000${'x'.repeat(300)}`;
    expect(normalizeIdempotencyKey(nul)).toBe(sha256(`\u0000${JSON.stringify(nul)}`));
    expect(normalizeIdempotencyKey(JSON.stringify(nul))).not.toBe(normalizeIdempotencyKey(nul));
    expect(normalizeIdempotencyKey('evt\ud800')).toBe(sha256(`\u0000${JSON.stringify('evt\ud800')}`));
    // Scopes: the same rule.
    expect(normalizeIdempotencyScope('payments:charge')).toBe('payments:charge');
    expect(normalizeIdempotencyScope('s'.repeat(1000))).toBe(sha256('s'.repeat(1000)));
    expect(normalizeIdempotencyScope('pay\u0000ments')).toBe(normalizeIdempotencyKey('pay\u0000ments'));
  });
});

describe('stored forms through jobs, the admin lookup and the CLI', () => {
  const apps = useApps('idem-normal');
  const pool = pgPool(3);
  const table = uniqueTable('idem_normal');
  let admin: AdminTestApp | undefined;

  afterEach(async () => {
    await admin?.close();
    admin = undefined;
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await pool.end();
  });

  it('a NUL key written through a job is found by the admin lookup and by the CLI keys show (--key-json)', async () => {
    const queueName = uniqueName('idem-normal-adm');
    admin = await startAdminApp({
      queues: [
        {
          queue: queueName,
          idempotency: { key: (job) => (job.data as { eventId: string }).eventId },
          handler: async () => ({ charged: 1 }),
        },
      ],
    });
    const key = 'evt\u0000nul';
    const job = await admin.queue(queueName).add('settle', { eventId: key });
    await expect(admin.finished(queueName, job)).resolves.toEqual({ charged: 1 });
    const scope = `${queueName}:settle`;
    const stored = normalizeIdempotencyKey(key);
    expect(stored).toMatch(/^sha256:[0-9a-f]{64}$/);

    const found = await http(
      `${admin.adminUrl}/api/keys?scope=${encodeURIComponent(scope)}&key=${encodeURIComponent(key)}`,
      { headers: { authorization: OPS } },
    );
    expect(found.status).toBe(200);
    expect(found.json as AdminKeyLookup).toMatchObject({
      scope,
      key: stored,
      record: { scope, key: stored, state: 'completed', jobId: job.id, result: JSON.stringify({ charged: 1 }) },
    });

    const shown = await runCliJson<{ found: boolean; key: string; scope: string; record: { state: string } }>([
      'keys',
      'show',
      '--key-json',
      JSON.stringify(key),
      '--queue',
      queueName,
      '--name',
      'settle',
      '--prefix',
      admin.prefix,
    ]);
    expect(shown.code).toBe(0);
    expect(shown.json).toMatchObject({
      found: true,
      key: stored,
      scope,
      matchedAs: 'normalized',
      record: { state: 'completed' },
    });

    // The scope, too, can be given as JSON (a NUL in the scope is hashed like a key).
    const byScope = await runCliJson<{ found: boolean; scope: string }>([
      'keys',
      'show',
      '--key-json',
      JSON.stringify(key),
      '--scope-json',
      JSON.stringify(scope),
      '--prefix',
      admin.prefix,
    ]);
    expect(byScope.json).toMatchObject({ found: true, scope });
    // The stored form, pasted as a record or an event shows it, is found too (not hashed a second time).
    const pasted = await http(
      `${admin.adminUrl}/api/keys?scope=${encodeURIComponent(scope)}&key=${encodeURIComponent(stored)}`,
      { headers: { authorization: OPS } },
    );
    expect(pasted.json as AdminKeyLookup).toMatchObject({
      key: stored,
      matchedAs: 'stored form',
      record: { key: stored, state: 'completed' },
    });
    const pastedCli = await runCliJson<{ found: boolean; key: string }>([
      'keys',
      'show',
      stored,
      '--scope',
      scope,
      '--prefix',
      admin.prefix,
    ]);
    expect(pastedCli.json).toMatchObject({ found: true, key: stored, matchedAs: 'stored form' });
    const both = await runCli(['keys', 'show', 'k', '--key-json', '"k"', '--scope', 's', '--prefix', 'p']);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('Use <key> or --key-json, not both');
  });

  it('a raw "sha256:<hex>" key and the key it looks like are two records; so are a NUL key and its JSON text', async () => {
    const long = `L${'x'.repeat(400)}`;
    const nul = `N\u0000${'y'.repeat(300)}`;
    const keys = [long, sha256(long), nul, JSON.stringify(nul)];
    for (const [label, store] of [
      ['redis', undefined],
      ['postgres', new PostgresIdempotencyStore({ pool, table })],
    ] as const) {
      if (store) await store.migrate();
      const app = await apps.start({
        module: store ? { idempotency: { stores: { sql: store } } } : {},
        idempotency: { key: (job) => (job.data as { key: string }).key, ...(store ? { store: 'sql' } : {}) },
        handler: async (job) => ({ key: (job.data as { key: string }).key.slice(0, 8) }),
      });
      for (const key of keys) {
        const job = await app.queue.add('charge', { key });
        expect([label, await app.finished(job)]).toEqual([label, { key: key.slice(0, 8) }]);
      }
      expect([label, app.runs.length]).toEqual([label, 4]);
      const reader = store ?? new RedisIdempotencyStore({ client: apps.redis, prefix: app.prefix });
      const stored = keys.map(normalizeIdempotencyKey);
      expect(new Set(stored).size).toBe(4);
      for (const [index, key] of stored.entries()) {
        expect([label, await reader.get(`${app.queue.name}:charge`, key)]).toEqual([
          label,
          expect.objectContaining({ key, result: JSON.stringify({ key: keys[index].slice(0, 8) }) }),
        ]);
      }
    }
  });

  it('a long scope is stored bounded (sha256) and still replays', async () => {
    const store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    const scope = `scope-${'s'.repeat(5000)}`;
    const app = await apps.start({
      module: { idempotency: { stores: { sql: store } } },
      idempotency: { key: (job) => (job.data as { key: string }).key, scope, store: 'sql' },
      handler: async (job) => ({ ran: job.id }),
    });
    const first = await app.queue.add('charge', { key: 'k1' });
    const second = await app.queue.add('charge', { key: 'k1' });
    expect(await app.finished(first)).toEqual({ ran: first.id });
    expect(await app.finished(second)).toEqual({ ran: first.id });
    expect(app.runs.length).toBe(1);
    const { rows } = await pool.query<{ scope: string }>(
      `SELECT scope FROM ${pg.escapeIdentifier(table)} WHERE key = 'k1'`,
    );
    expect(rows.map((row) => row.scope)).toEqual([sha256(scope)]);
    expect(await store.get(normalizeIdempotencyScope(scope), 'k1')).toMatchObject({ state: 'completed' });
  });
});
