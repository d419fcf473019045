import { postgresMigration } from '../sql/postgres-migration.js';
import { sqliteMigration } from '../sql/sqlite-dialect.js';
import { DEFAULT_IDEMPOTENCY_TABLE, parseTableName } from '../sql/sql-records.js';
import { typeOrmDialect } from './typeorm-idempotency.store.js';

/** What a migration needs of TypeORM's `QueryRunner`: a real one fits. */
export interface TypeOrmMigrationRunnerLike {
  /** The DataSource the migration runs on (typeorm 1.x): its `options.type` picks the SQL. */
  readonly dataSource?: {
    /** The DataSource's options. */
    readonly options: {
      /** The database type: `'postgres'` picks PostgreSQL's SQL, `'better-sqlite3'` or `'sqlite'` SQLite's. */
      readonly type: string;
    };
  };
  /** The same, as typeorm 0.3 names it. */
  readonly connection?: {
    /** The DataSource's options. */
    readonly options: {
      /** The database type: `'postgres'` picks PostgreSQL's SQL, `'better-sqlite3'` or `'sqlite'` SQLite's. */
      readonly type: string;
    };
  };
  /** Runs one SQL statement of the migration (TypeORM's `QueryRunner.query`). */
  query(query: string): Promise<unknown>;
}

/** A TypeORM migration (`MigrationInterface`): a class of this shape goes into the DataSource's `migrations`. */
export interface TypeOrmIdempotencyMigration {
  /** The migration's name, ending with its 13-digit timestamp as TypeORM requires. */
  readonly name: string;
  /** Creates the record table and its index when they do not exist (`IF NOT EXISTS`): safe on an existing table. */
  up(queryRunner: TypeOrmMigrationRunnerLike): Promise<void>;
  /** Drops the record table (and with it every idempotency record). */
  down(queryRunner: TypeOrmMigrationRunnerLike): Promise<void>;
}

/** Options of {@link typeOrmIdempotencyMigration}. */
export interface TypeOrmIdempotencyMigrationOptions {
  /** The record table, as given to the store. Default `'unique_jobs_idempotency'`. */
  table?: string;
  /**
   * The migration's timestamp (ms since the epoch): it orders the migration among yours and names it
   * `UniqueJobsIdempotency<timestamp>`. Default `1767225600000` (2026-01-01).
   */
  timestamp?: number;
}

const DEFAULT_TIMESTAMP = 1_767_225_600_000;

/**
 * A TypeORM migration class that creates the idempotency record table and its index (`IF NOT EXISTS`, PostgreSQL or
 * SQLite after the DataSource's type) and drops the table on `down`. For a table other than the default one; the
 * default is {@link UniqueJobsIdempotencyMigration}.
 *
 * ```ts
 * new DataSource({ ..., migrations: [typeOrmIdempotencyMigration({ table: 'jobs.idempotency' }), ...yours] });
 * ```
 */
export function typeOrmIdempotencyMigration(
  options: TypeOrmIdempotencyMigrationOptions = {},
): new () => TypeOrmIdempotencyMigration {
  const table = parseTableName(options.table ?? DEFAULT_IDEMPOTENCY_TABLE, 'typeOrmIdempotencyMigration');
  const timestamp = options.timestamp ?? DEFAULT_TIMESTAMP;
  if (!Number.isInteger(timestamp) || String(timestamp).length !== 13) {
    throw new Error(`typeOrmIdempotencyMigration: timestamp must be a 13-digit ms timestamp (got ${timestamp})`);
  }
  const name = `UniqueJobsIdempotency${timestamp}`;
  const migration = class implements TypeOrmIdempotencyMigration {
    readonly name = name;

    async up(queryRunner: TypeOrmMigrationRunnerLike): Promise<void> {
      const dialect = typeOrmDialect(String((queryRunner.dataSource ?? queryRunner.connection)?.options.type));
      const ddl = dialect === 'postgres' ? postgresMigration(table) : sqliteMigration(table);
      for (const statement of ddl) await queryRunner.query(statement);
    }

    async down(queryRunner: TypeOrmMigrationRunnerLike): Promise<void> {
      await queryRunner.query(`DROP TABLE IF EXISTS ${table.quoted}`);
    }
  };
  Object.defineProperty(migration, 'name', { value: name });
  return migration;
}

/**
 * The TypeORM migration of the default idempotency table (`unique_jobs_idempotency`), named
 * `UniqueJobsIdempotency1767225600000`: add it to your DataSource's `migrations` and run them as usual
 * (`migrationsRun: true`, or the TypeORM CLI).
 */
export const UniqueJobsIdempotencyMigration = typeOrmIdempotencyMigration();
