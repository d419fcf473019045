// The SQL stores beyond the contract: a missing table reported at bootstrap with what creates it; the migrations (the
// SQL files shipped in the package, the TypeORM migration class); a connection dropped inside a transaction reported
// as IdempotencyConnectionLostError by every PostgreSQL store and adapter, which stay usable; and how many statements
// a job costs.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TransactionalAdapterDrizzleOrm } from '@nestjs-cls/transactional-adapter-drizzle-orm';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  DrizzleIdempotencyStore,
  IdempotencyConnectionLostError,
  IdempotencyStoreNotReadyError,
  PostgresIdempotencyStore,
  SqliteIdempotencyStore,
  TransactionHostIdempotencyStore,
  TypeOrmIdempotencyStore,
  UniqueJobsIdempotencyMigration,
  typeOrmIdempotencyMigration,
  type IdempotencyStore,
  type SqlIdempotencyStore,
} from '../../lib/index.js';
import { processorClass } from '../support/app.js';
import { spawnFixture } from '../support/fixtures.js';
import { bootstrapError } from '../support/bootstrap.js';
import { databaseUrl, pgPool, uniqueTable } from '../support/postgres.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { FakeTransactionHost } from './fake-transaction-host.js';

/** A TCP port nothing listens on (bound, then closed). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const claim = (key: string, owner: string) => ({
  scope: 'adapters',
  key,
  owner,
  leaseMs: 60_000,
  fingerprint: undefined,
  jobId: '1',
});

describe('SQL stores: bootstrap check, migrations, dropped connections', () => {
  const pool = pgPool(6);
  const killer = pgPool(1);
  const dataSource = new DataSource({ type: 'postgres', url: databaseUrl(), poolSize: 4, logging: false });
  const tables: string[] = [];
  const table = (label: string) => {
    const name = uniqueTable(label);
    tables.push(name);
    return name;
  };

  beforeAll(async () => {
    await dataSource.initialize();
  });

  afterAll(async () => {
    for (const name of tables) await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(name)}`);
    await dataSource.destroy();
    await Promise.all([pool.end(), killer.end()]);
  });

  describe('a missing table fails the bootstrap, naming the store as registered, the table and what creates it', () => {
    const boot = (stores: Record<string, IdempotencyStore>, store: string) => {
      const queue = uniqueName('verify');
      return bootstrapError({
        queues: [queue],
        module: { idempotency: { stores } },
        providers: [processorClass({ queue, idempotency: { key: (job) => (job.data as { k: string }).k, store } }, [])],
      });
    };

    it.each([
      ['PostgresIdempotencyStore', 'postgres', (name: string) => new PostgresIdempotencyStore({ pool, table: name })],
      [
        'TypeOrmIdempotencyStore',
        'postgres',
        (name: string) => new TypeOrmIdempotencyStore({ dataSource, table: name }),
      ],
      [
        'DrizzleIdempotencyStore',
        'postgres',
        (name: string) => new DrizzleIdempotencyStore({ db: drizzle(pool), table: name }),
      ],
    ] as const)('%s', async (label, dialect, make) => {
      const name = table('verify');
      const store = make(name);
      const error = await boot({ sql: store }, 'sql');
      expect(error).toBeInstanceOf(IdempotencyStoreNotReadyError);
      const { message } = error as IdempotencyStoreNotReadyError;
      expect((error as IdempotencyStoreNotReadyError).store).toBe('sql');
      expect(message).toContain(`Idempotency store "sql" is not ready: ${label} cannot read its table "${name}"`);
      expect(message).toContain(`relation "${name}" does not exist`);
      expect(message).not.toContain('cannot reach');
      expect(message).toContain('`await store.migrate()`');
      expect(message).toContain(`typeOrmIdempotencyMigration({ table: '${name}' })`);
      expect(message).toContain(`PostgresIdempotencyStore.migrationSql('${name}')`);
      expect(message).toContain(`node_modules/nestjs-unique-jobs/sql/unique_jobs_idempotency.${dialect}.sql`);

      await (store as SqlIdempotencyStore).migrate();
      expect(await boot({ sql: store }, 'sql')).toBeUndefined();
    });

    it.each(['PostgresIdempotencyStore', 'DrizzleIdempotencyStore'] as const)(
      '%s on a database that does not answer: reported as unreachable, naming host and port, not as a missing table',
      async (label) => {
        const port = await freePort();
        const unreachable = new pg.Pool({ host: '127.0.0.1', port, user: 'postgres', database: 'test', max: 1 });
        try {
          const name = uniqueTable('verify_unreachable');
          const store =
            label === 'PostgresIdempotencyStore'
              ? new PostgresIdempotencyStore({ pool: unreachable, table: name })
              : new DrizzleIdempotencyStore({ db: drizzle(unreachable), table: name });
          const error = await boot({ sql: store }, 'sql');
          expect(error).toBeInstanceOf(IdempotencyStoreNotReadyError);
          const { message } = error as Error;
          expect(message).toContain(
            `Idempotency store "sql" is not ready: ${label} cannot reach its database at 127.0.0.1:${port} (ECONNREFUSED`,
          );
          expect(message).not.toContain('cannot read its table');
          expect(message).not.toContain('migrate');
        } finally {
          await unreachable.end();
        }
      },
    );

    it('SqliteIdempotencyStore', async () => {
      const database = new Database(':memory:');
      try {
        const store = new SqliteIdempotencyStore({ database });
        const error = await boot({ other: store }, 'other');
        expect(error).toBeInstanceOf(IdempotencyStoreNotReadyError);
        expect((error as Error).message).toContain(
          'Idempotency store "other" is not ready: SqliteIdempotencyStore cannot read its table "unique_jobs_idempotency" (no such table: unique_jobs_idempotency)',
        );
        expect((error as Error).message).toContain(
          'node_modules/nestjs-unique-jobs/sql/unique_jobs_idempotency.sqlite.sql',
        );
        await store.migrate();
        expect(await boot({ other: store }, 'other')).toBeUndefined();
      } finally {
        database.close();
      }
    });
  });

  it('ships the migration SQL files, equal to migrationSql(), in the package files', () => {
    const file = (dialect: string) => readFileSync(`sql/unique_jobs_idempotency.${dialect}.sql`, 'utf8');
    const body = (text: string) => text.replace(/^--.*\n/gm, '');
    expect(body(file('postgres'))).toBe(PostgresIdempotencyStore.migrationSql());
    expect(body(file('sqlite'))).toBe(SqliteIdempotencyStore.migrationSql());
    const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { files: string[] };
    expect(manifest.files).toContain('sql');
  });

  it.each(['postgres', 'better-sqlite3'] as const)(
    'the TypeORM migration class creates the table on %s (and drops it on revert)',
    async (type) => {
      const name = table('typeorm_migration');
      const options = type === 'postgres' ? { type, url: databaseUrl() } : { type, database: ':memory:' };
      const migrations = [typeOrmIdempotencyMigration({ table: name })];
      const source = new DataSource({
        ...options,
        migrations,
        migrationsTableName: `${name}_migrations`,
        logging: false,
      });
      tables.push(`${name}_migrations`);
      await source.initialize();
      try {
        const store = new TypeOrmIdempotencyStore({ dataSource: source, table: name });
        await expect(store.verify()).rejects.toThrow(/cannot read its table/);
        const ran = await source.runMigrations();
        expect(ran.map((migration) => migration.name)).toEqual(['UniqueJobsIdempotency1767225600000']);
        await store.verify();
        expect(await store.claim(claim('m', 'o'))).toEqual({ claimed: true, takeover: false });
        await source.undoLastMigration();
        await expect(store.verify()).rejects.toThrow(/cannot read its table/);
      } finally {
        await source.destroy();
      }
      expect(new UniqueJobsIdempotencyMigration().name).toBe('UniqueJobsIdempotency1767225600000');
    },
  );

  describe("the transaction's connection terminated while the handler awaits something else", () => {
    const stores: [string, () => IdempotencyStore<unknown>][] = [
      ['PostgresIdempotencyStore', () => new PostgresIdempotencyStore({ pool, table: shared })],
      ['TypeOrmIdempotencyStore', () => new TypeOrmIdempotencyStore({ dataSource, table: shared })],
      ['DrizzleIdempotencyStore', () => new DrizzleIdempotencyStore({ db: drizzle(pool), table: shared })],
      [
        'TransactionHostIdempotencyStore (TypeORM adapter)',
        () => {
          const adapter = new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource });
          const txHost = new FakeTransactionHost<EntityManager>(adapter.optionsFactory(dataSource));
          return new TransactionHostIdempotencyStore({ txHost, table: shared });
        },
      ],
      [
        'TransactionHostIdempotencyStore (Drizzle adapter)',
        () => {
          const db = drizzle(pool);
          const adapter = new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: 'DRIZZLE' });
          const txHost = new FakeTransactionHost<NodePgDatabase>(
            adapter.optionsFactory(db) as unknown as ConstructorParameters<
              typeof FakeTransactionHost<NodePgDatabase>
            >[0],
          );
          return new TransactionHostIdempotencyStore({ txHost, table: shared });
        },
      ],
    ];
    const shared = uniqueTable('idem_dropped');
    tables.push(shared);

    beforeAll(async () => {
      await new PostgresIdempotencyStore({ pool, table: shared }).migrate();
    });

    /** The backend pid of the transaction, read through the handle the handler gets. */
    const pidOf = async (handle: unknown): Promise<number> => {
      const text = 'SELECT pg_backend_pid() AS pid';
      if (typeof (handle as EntityManager).getRepository === 'function') {
        return Number((await (handle as EntityManager).query<{ pid: number }[]>(text))[0].pid);
      }
      if (typeof (handle as pg.PoolClient).release === 'function') {
        return Number((await (handle as pg.PoolClient).query<{ pid: number }>(text)).rows[0].pid);
      }
      const { sql } = await import('drizzle-orm');
      const { rows } = await (handle as NodePgDatabase).execute(sql.raw(text));
      return Number(rows[0].pid);
    };

    it.each(stores)(
      '%s: IdempotencyConnectionLostError, nothing committed, the store works on',
      async (_label, make) => {
        const store = make();
        const key = uniqueName('dropped');
        expect(await store.claim(claim(key, 'first'))).toEqual({ claimed: true, takeover: false });
        const attempt = store.runInTransaction!(
          { scope: 'adapters', key, owner: 'first' },
          async (handle) => {
            const pid = await pidOf(handle);
            await killer.query('SELECT pg_terminate_backend($1)', [pid]);
            await waitFor('the backend to end', async () => {
              const { rowCount } = await killer.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]);
              return rowCount === 0;
            });
            // The connection is gone while the handler awaits something else (no query is running on it).
            await new Promise((resolve) => setTimeout(resolve, 50));
            return 'done';
          },
          (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
        );
        await expect(attempt).rejects.toBeInstanceOf(IdempotencyConnectionLostError);
        await expect(attempt).rejects.toMatchObject({
          scope: 'adapters',
          key,
          message: expect.stringContaining('(terminating connection due to administrator command)'),
        });
        // Rolled back by the database: the claim is still in progress, and its owner can settle it.
        expect(await store.get('adapters', key)).toMatchObject({ state: 'in_progress', owner: 'first' });
        expect(await store.release({ scope: 'adapters', key, owner: 'first' })).toBe(true);
        // The next transaction runs on a healthy connection.
        expect(await store.claim(claim(key, 'second'))).toEqual({ claimed: true, takeover: false });
        expect(
          await store.runInTransaction!(
            { scope: 'adapters', key, owner: 'second' },
            async () => 'ok',
            (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
          ),
        ).toBe('ok');
        expect(await store.get('adapters', key)).toMatchObject({ state: 'completed', result: '"ok"' });
      },
    );
  });
});

describe('optional peer dependencies', () => {
  it('the library loads with TypeORM, Drizzle, @nestjs-cls, pg and better-sqlite3 all unresolvable', async () => {
    const fixture = spawnFixture('no-optional-peers', {});
    const { loaded } = await fixture.waitFor((message) => 'loaded' in message);
    expect(loaded).toEqual(expect.any(Number));
    expect(await fixture.exited).toMatchObject({ code: 0 });
  });
});
