import { IdempotencyConnectionLostError } from '../../errors/idempotency-connection-lost.error.js';
import { openWatched } from '../sql/connection-watch.js';
import type { SqlDialectName, SqlIdempotencyAdapter, SqlResult, SqlStatement } from '../sql/sql-adapter.interface.js';
import { SqlIdempotencyStore } from '../sql/sql-idempotency.store.js';

/** TypeORM's isolation levels (`IsolationLevel`). */
export type TypeOrmIsolationLevel =
  'READ UNCOMMITTED' | 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE' | 'SNAPSHOT';

/**
 * What the store needs of a TypeORM `QueryRunner` (typeorm 0.3 and 1.x). Declared here so that `typeorm` stays an
 * optional peer dependency: a real `QueryRunner` fits.
 */
export interface TypeOrmQueryRunnerLike<Manager = unknown> {
  /** The `EntityManager` bound to this runner's connection: inside a transaction, every write through it joins it. */
  readonly manager: Manager;
  /** Whether `release()` was called: the runner may not be used any more. */
  readonly isReleased: boolean;
  /** Whether a transaction started on the runner has not yet been committed or rolled back. */
  readonly isTransactionActive: boolean;
  /** Takes the runner's database connection from the pool (the store calls it before its first statement). */
  connect(): Promise<unknown>;
  /** Runs one statement with positional parameters; `records` are its rows, `affected` the rows it changed. */
  query(
    query: string,
    parameters: unknown[] | undefined,
    useStructuredResult: true,
  ): Promise<{ records: unknown[]; affected?: number | null }>;
  /** Opens a transaction on the runner's connection, at this isolation level (the database's default without one). */
  startTransaction(isolationLevel?: TypeOrmIsolationLevel): Promise<void>;
  /** Commits the open transaction; rejects when the database refuses it (a serialization failure, a lost connection). */
  commitTransaction(): Promise<void>;
  /** Rolls the open transaction back. */
  rollbackTransaction(): Promise<void>;
  /** Gives the connection back to the pool; the store calls it once it is done with the runner. */
  release(): Promise<void>;
}

/** What the store needs of a TypeORM `DataSource`: a real one fits. */
export interface TypeOrmDataSourceLike<Manager = unknown> {
  /** Its options: `type` says the database (`'postgres'`, `'better-sqlite3'`, `'sqlite'`). */
  readonly options: {
    /** The database type: `'postgres'`, `'better-sqlite3'` or `'sqlite'` (the store throws at construction on others). */
    readonly type: string;
  };
  /** A new runner, not yet connected: the store opens one per transaction and releases it. */
  createQueryRunner(): TypeOrmQueryRunnerLike<Manager>;
}

/** Options of {@link TypeOrmIdempotencyStore}. */
export interface TypeOrmIdempotencyStoreOptions<Manager = unknown> {
  /** The application's `DataSource` (PostgreSQL, or SQLite through `better-sqlite3`). The store never destroys it. */
  dataSource: TypeOrmDataSourceLike<Manager>;
  /** The table of the records (see `SqlIdempotencyStoreOptions.table`). Default `'unique_jobs_idempotency'`. */
  table?: string;
  /**
   * Isolation level of the transactions of transactional mode (the handler's writes run in it). Default: the
   * DataSource's (`isolationLevel` option), else the database's (READ COMMITTED on PostgreSQL).
   */
  isolation?: TypeOrmIsolationLevel;
}

/**
 * Idempotency records on a TypeORM `DataSource`, PostgreSQL or SQLite: the same table and statements as
 * `PostgresIdempotencyStore` and `SqliteIdempotencyStore`, run through TypeORM's query runners.
 *
 * In transactional mode the handler receives the transaction's `EntityManager` (`idempotencyOf<EntityManager>(job)
 * .transaction`): `manager.getRepository(Payment).save(…)`, `manager.save(…)` and `manager.query(…)` join the claim's
 * transaction and commit with the completed record. **A repository injected with `@InjectRepository` does not follow
 * the transaction** (TypeORM binds a repository to the manager that created it): use the manager's repositories in the
 * handler, or let `@nestjs-cls/transactional` carry the transaction to your services (`TransactionHostIdempotencyStore`).
 *
 * PostgreSQL: each transaction holds one connection of the DataSource's pool for the whole handler (size the pool
 * above the worker's concurrency). If that connection drops while the handler runs, the attempt fails with
 * `IdempotencyConnectionLostError` and the process lives on. SQLite: a TypeORM DataSource is one connection; the store
 * serializes its transactions, and any other statement run on the DataSource meanwhile becomes part of the open
 * transaction: give the worker process a DataSource that nothing else writes through while jobs run.
 *
 * ```ts
 * const store = new TypeOrmIdempotencyStore({ dataSource });
 * await store.migrate(); // or the migration class UniqueJobsIdempotencyMigration
 * ```
 */
export class TypeOrmIdempotencyStore<Manager = unknown> extends SqlIdempotencyStore<Manager> {
  constructor(options: TypeOrmIdempotencyStoreOptions<Manager>) {
    const dataSource = options?.dataSource;
    if (typeof dataSource?.createQueryRunner !== 'function' || typeof dataSource.options?.type !== 'string') {
      throw new Error('TypeOrmIdempotencyStore: options.dataSource must be a TypeORM DataSource');
    }
    super({
      adapter: typeOrmAdapter(dataSource, options.isolation),
      table: options.table,
      name: 'typeorm',
    });
  }
}

/** The SQL dialect of a TypeORM database type, or an Error naming the supported ones. */
export function typeOrmDialect(type: string): SqlDialectName {
  if (type === 'postgres') return 'postgres';
  if (type === 'better-sqlite3' || type === 'sqlite') return 'sqlite';
  throw new Error(
    `TypeORM database type "${type}" is not supported by the idempotency stores: use "postgres" or "better-sqlite3"`,
  );
}

/** Runs one statement on a query runner, with TypeORM's structured result. */
export async function typeOrmExecute(runner: TypeOrmQueryRunnerLike, statement: SqlStatement): Promise<SqlResult> {
  const result = await runner.query(statement.text, [...statement.params], true);
  const rows = (result.records ?? []) as Record<string, unknown>[];
  return { rows, rowCount: statement.returnsRows ? rows.length : Number(result.affected ?? 0) };
}

/**
 * Runs `body` in a transaction of a new query runner of `dataSource`; the handle is the runner's `EntityManager`. A
 * connection that drops meanwhile (TypeORM releases such a runner itself) rejects with
 * `IdempotencyConnectionLostError`.
 */
export async function typeOrmTransaction<Manager, R>(
  dataSource: TypeOrmDataSourceLike<Manager>,
  isolation: TypeOrmIsolationLevel | undefined,
  body: (runner: TypeOrmQueryRunnerLike<Manager>) => Promise<R>,
): Promise<R> {
  const runner = dataSource.createQueryRunner();
  // Watched from the moment TypeORM's pg pool hands the runner its connection (TypeORM listens on it only once its
  // connect promise resolves); TypeORM also listens on it, and releases the runner; this watch keeps the error.
  const master = (dataSource as { driver?: { master?: unknown } }).driver?.master;
  return openWatched(master, async (watch) => {
    try {
      await runner.connect();
      watch.adopt((runner as { databaseConnection?: unknown }).databaseConnection);
      await runner.startTransaction(isolation);
      const value = await body(runner);
      await runner.commitTransaction();
      return value;
    } catch (error) {
      if (!forgetEndedTypeOrmTransaction(runner) && runner.isTransactionActive && !runner.isReleased) {
        await runner.rollbackTransaction().catch(() => undefined);
      }
      const lost = watch.lost() ?? (runner.isReleased ? error : undefined);
      if (lost) throw new IdempotencyConnectionLostError(lost);
      throw error;
    } finally {
      watch.stop();
      if (!runner.isReleased) await runner.release();
    }
  });
}

/**
 * Whether a runner's transaction is still open: TypeORM's own flag (`commitTransaction()`/`rollbackTransaction()` clear
 * it) and, on better-sqlite3, the connection's (a raw `COMMIT`/`ROLLBACK` through `manager.query` clears that one).
 */
export function typeOrmTransactionActive(runner: TypeOrmQueryRunnerLike): boolean {
  // PostgreSQL: the runner's own pg client (no such flag); SQLite: the driver's one better-sqlite3 connection.
  const { databaseConnection, driver } = runner as {
    databaseConnection?: { inTransaction?: unknown };
    driver?: { databaseConnection?: { inTransaction?: unknown } };
  };
  const connection = databaseConnection ?? driver?.databaseConnection;
  return runner.isTransactionActive && connection?.inTransaction !== false;
}

/**
 * A handler that ended the transaction with a raw `COMMIT`/`ROLLBACK` leaves TypeORM's runner counting it open (its
 * depth too, inside a nested `manager.transaction()`), and TypeORM's own rollback then fails on it. On SQLite that
 * runner is the one the whole DataSource shares: every later transaction of the application would start as a
 * savepoint of a transaction that is not there, and never commit. When the connection says no transaction is open,
 * this sets the runner's count back to none (TypeORM has no API for it) and answers `true`; otherwise it changes nothing.
 */
export function forgetEndedTypeOrmTransaction(runner: TypeOrmQueryRunnerLike): boolean {
  if (!runner.isTransactionActive || typeOrmTransactionActive(runner)) return false;
  const counted = runner as unknown as { isTransactionActive: boolean; transactionDepth?: number };
  counted.isTransactionActive = false;
  if (typeof counted.transactionDepth === 'number') counted.transactionDepth = 0;
  return true;
}

/** The adapter of {@link TypeOrmIdempotencyStore}. */
export function typeOrmAdapter<Manager>(
  dataSource: TypeOrmDataSourceLike<Manager>,
  isolation?: TypeOrmIsolationLevel,
): SqlIdempotencyAdapter<Manager> {
  return {
    dialect: typeOrmDialect(dataSource.options.type),
    async execute(statement) {
      const runner = dataSource.createQueryRunner();
      try {
        return await typeOrmExecute(runner, statement);
      } finally {
        if (!runner.isReleased) await runner.release();
      }
    },
    transaction: (body) =>
      typeOrmTransaction(dataSource, isolation, (runner) =>
        body({
          handle: runner.manager,
          execute: (statement) => typeOrmExecute(runner, statement),
          active: () => typeOrmTransactionActive(runner),
        }),
      ),
  };
}
