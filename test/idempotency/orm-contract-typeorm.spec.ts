// TypeOrmIdempotencyStore (PostgreSQL and SQLite) and TransactionHostIdempotencyStore on the TypeORM adapter of
// @nestjs-cls/transactional (PostgreSQL), against the shared store contract. The probe writes through the handle
// runInTransaction gives the handler: the transaction's EntityManager.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource, type EntityManager } from 'typeorm';
import { TransactionHostIdempotencyStore, TypeOrmIdempotencyStore } from '../../lib/index.js';
import { databaseUrl, uniqueTable } from '../support/postgres.js';
import { FakeTransactionHost } from './fake-transaction-host.js';
import { describeIdempotencyStoreContract } from '../../lib/ops/store-contract/index.js';

function postgres(poolSize = 10): DataSource {
  return new DataSource({ type: 'postgres', url: databaseUrl(), poolSize, logging: false });
}

async function postgresFixture(
  make: (
    dataSource: DataSource,
    table: string,
  ) => TypeOrmIdempotencyStore<EntityManager> | TransactionHostIdempotencyStore<EntityManager>,
) {
  const [dataSource, other] = [postgres(), postgres(5)];
  await Promise.all([dataSource.initialize(), other.initialize()]);
  const table = uniqueTable('idem_typeorm');
  const probe = uniqueTable('idem_typeorm_probe');
  const cleanup = async () => {
    try {
      await dataSource.query(`DROP TABLE IF EXISTS ${table}, ${probe}`);
    } finally {
      await Promise.all([dataSource.destroy(), other.destroy()]);
    }
  };
  try {
    const store = make(dataSource, table);
    await store.migrate();
    await dataSource.query(`CREATE TABLE ${probe} (marker text NOT NULL)`);
    return {
      store,
      peers: [make(other, table)],
      probe: {
        async write(manager: EntityManager, marker: string) {
          await manager.query(`INSERT INTO ${probe} (marker) VALUES ($1)`, [marker]);
        },
        async count(marker: string) {
          const rows = await dataSource.query<{ n: number }[]>(
            `SELECT count(*)::int AS n FROM ${probe} WHERE marker = $1`,
            [marker],
          );
          return rows[0].n;
        },
      },
      cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

describeIdempotencyStoreContract<EntityManager>('typeorm (postgres)', {
  transactional: true,
  create: () => postgresFixture((dataSource, table) => new TypeOrmIdempotencyStore({ dataSource, table })),
});

describeIdempotencyStoreContract<EntityManager>('typeorm (sqlite, better-sqlite3)', {
  transactional: true,
  async create() {
    const directory = mkdtempSync(join(tmpdir(), 'idem-typeorm-sqlite-'));
    const file = join(directory, 'store.db');
    const sources: DataSource[] = [];
    const reader = new Database(file, { readonly: false, timeout: 10_000 });
    const cleanup = async () => {
      await Promise.all(sources.filter((s) => s.isInitialized).map((s) => s.destroy()));
      reader.close();
      rmSync(directory, { recursive: true, force: true });
    };
    try {
      reader.pragma('journal_mode = WAL');
      reader.exec('CREATE TABLE handler_probe (marker TEXT NOT NULL)');
      const open = async () => {
        const dataSource = new DataSource({ type: 'better-sqlite3', database: file, enableWAL: true, timeout: 10_000 });
        sources.push(dataSource);
        return dataSource.initialize();
      };
      const [main, ...others] = await Promise.all([open(), open(), open()]);
      const store = new TypeOrmIdempotencyStore({ dataSource: main });
      await store.migrate();
      return {
        store,
        peers: others.map((dataSource) => new TypeOrmIdempotencyStore({ dataSource })),
        probe: {
          async write(manager: EntityManager, marker: string) {
            await manager.query('INSERT INTO handler_probe (marker) VALUES (?)', [marker]);
          },
          async count(marker: string) {
            const row = reader.prepare('SELECT count(*) AS n FROM handler_probe WHERE marker = ?').get(marker) as {
              n: number;
            };
            return row.n;
          },
        },
        cleanup,
      };
    } catch (error) {
      await cleanup();
      throw error;
    }
  },
});

describeIdempotencyStoreContract<EntityManager>('@nestjs-cls/transactional, TypeORM adapter (postgres)', {
  transactional: true,
  create: () =>
    postgresFixture((dataSource, table) => {
      const adapter = new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource });
      const txHost = new FakeTransactionHost<EntityManager>(adapter.optionsFactory(dataSource));
      return new TransactionHostIdempotencyStore({ txHost, table });
    }),
});
