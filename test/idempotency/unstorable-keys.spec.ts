// A key holding a character some store cannot hold (NUL: PostgreSQL's text refuses it with "invalid byte sequence";
// a lone surrogate: not well-formed Unicode) is normalised the same way for every store: stored as sha256 of NUL
// followed by its JSON text (the NUL keeps it apart from plain long keys). So it works on every store, runs once, replays, and is the same record key whatever the store. The events
// name the store as registered (the default store by its own name).
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import pg from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  DrizzleIdempotencyStore,
  PostgresIdempotencyStore,
  RedisIdempotencyStore,
  SqliteIdempotencyStore,
  TransactionHostIdempotencyStore,
  TypeOrmIdempotencyStore,
  type IdempotencyStore,
  type SqlIdempotencyStore,
} from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { databaseUrl, pgPool, uniqueTable } from '../support/postgres.js';
import { FakeTransactionHost } from './fake-transaction-host.js';

const stored = (text: string) =>
  `sha256:${createHash('sha256')
    .update(`\u0000${JSON.stringify(text)}`)
    .digest('hex')}`;

describe('keys with characters a store cannot hold, on every store', () => {
  const apps = useApps('idem-unstorable');
  const pool = pgPool(6);
  const directory = mkdtempSync(join(tmpdir(), 'idem-unstorable-'));
  const sqlite = new Database(join(directory, 'a.db'), { timeout: 5_000 });
  const drizzleFile = new Database(join(directory, 'b.db'), { timeout: 5_000 });
  const dataSource = new DataSource({ type: 'postgres', url: databaseUrl(), poolSize: 4, logging: false });
  const table = uniqueTable('idem_unstorable');
  let stores: [label: string, store: IdempotencyStore | undefined, transactional: boolean][];

  beforeAll(async () => {
    await dataSource.initialize();
    const txHost = new FakeTransactionHost<EntityManager>(
      new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }).optionsFactory(dataSource),
    );
    const sql: SqlIdempotencyStore[] = [
      new PostgresIdempotencyStore({ pool, table }),
      new SqliteIdempotencyStore({ database: sqlite }),
      new TypeOrmIdempotencyStore({ dataSource, table }),
      new DrizzleIdempotencyStore({ db: drizzlePg(pool), table }),
      new DrizzleIdempotencyStore({ db: drizzleSqlite(drizzleFile) }),
      new TransactionHostIdempotencyStore({ txHost, table }),
    ];
    for (const store of sql) await store.migrate();
    stores = [
      ['the default Redis store', undefined, false],
      ['PostgresIdempotencyStore', sql[0], true],
      ['SqliteIdempotencyStore', sql[1], true],
      ['TypeOrmIdempotencyStore', sql[2], true],
      ['DrizzleIdempotencyStore (node-postgres)', sql[3], true],
      ['DrizzleIdempotencyStore (better-sqlite3)', sql[4], true],
      ['TransactionHostIdempotencyStore', sql[5], true],
    ];
  });

  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await Promise.all([pool.end(), dataSource.destroy()]);
    sqlite.close();
    drizzleFile.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it('a NUL (and a lone surrogate) in the key: stored hashed, runs once, replays; events name the registered store', async () => {
    for (const [label, store, transactional] of stores) {
      const keys = [`evt\u0000${label}`, `evt\ud800${label}`];
      const app = await apps.start({
        module: store ? { idempotency: { stores: { sql: store } } } : {},
        idempotency: {
          key: (job) => (job.data as { key: string }).key,
          ...(store ? { store: 'sql', transactional } : {}),
        },
        handler: async (job) => ({ ran: job.id }),
      });
      const log = new EventLog(app);
      for (const key of keys) {
        const first = await app.queue.add('charge', { key });
        const second = await app.queue.add('charge', { key });
        expect([label, await app.finished(first)]).toEqual([label, { ran: first.id }]);
        expect([label, await app.finished(second)]).toEqual([label, { ran: first.id }]);
        const reader = store ?? new RedisIdempotencyStore({ client: apps.redis, prefix: app.prefix });
        expect([label, await reader.get(`${app.queue.name}:charge`, stored(key))]).toEqual([
          label,
          expect.objectContaining({ state: 'completed', result: JSON.stringify({ ran: first.id }) }),
        ]);
      }
      expect([label, app.runs.length]).toEqual([label, 2]);
      const claimed = log.of('idempotencyClaimed');
      expect(claimed.map((event) => event.key)).toEqual(keys.map(stored));
      expect([label, [...new Set([...claimed, ...log.of('idempotencyReplayed')].map((event) => event.store))]]).toEqual(
        [label, [store ? 'sql' : 'redis']],
      );
    }
  });

  it('a NUL in the scope: stored hashed as well', async () => {
    const store = stores[1][1]!;
    const app = await apps.start({
      module: { idempotency: { stores: { sql: store } } },
      idempotency: { key: (job) => (job.data as { key: string }).key, scope: 'pay\u0000ments', store: 'sql' },
      handler: async () => 'ok',
    });
    const job = await app.queue.add('charge', { key: 'k' });
    expect(await app.finished(job)).toBe('ok');
    expect(await store.get(stored('pay\u0000ments'), 'k')).toMatchObject({ state: 'completed' });
  });
});
