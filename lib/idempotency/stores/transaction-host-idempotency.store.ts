import { IdempotencyConnectionLostError } from '../../errors/idempotency-connection-lost.error.js';
import { openWatched } from '../sql/connection-watch.js';
import type { SqlDialectName, SqlIdempotencyAdapter, SqlResult, SqlStatement } from '../sql/sql-adapter.interface.js';
import { SqlIdempotencyStore } from '../sql/sql-idempotency.store.js';
import {
  drizzleClientOf,
  drizzlePgExecute,
  drizzleTransactionClient,
  guardLateStatements,
  type DrizzlePgDatabaseLike,
} from './drizzle-idempotency.store.js';
import {
  typeOrmDialect,
  typeOrmExecute,
  forgetEndedTypeOrmTransaction,
  typeOrmTransactionActive,
  type TypeOrmDataSourceLike,
  type TypeOrmQueryRunnerLike,
} from './typeorm-idempotency.store.js';

/**
 * What the store needs of `@nestjs-cls/transactional`'s `TransactionHost` (3.x): a real one fits. Declared here so that
 * `@nestjs-cls/transactional` stays an optional peer dependency.
 */
export interface TransactionHostLike<Tx = unknown> {
  /** The active transaction of the current async context, or the adapter's non-transactional instance. */
  readonly tx: Tx;
  /** Runs `fn` in a transaction, with a propagation mode (the store uses `'REQUIRES_NEW'`) and the adapter's options. */
  withTransaction<R>(propagation: string, options: unknown, fn: () => Promise<R>): Promise<R>;
  /** Runs `fn` outside any transaction. */
  withoutTransaction<R>(fn: () => Promise<R>): Promise<R>;
}

/** Options of {@link TransactionHostIdempotencyStore}. */
export interface TransactionHostIdempotencyStoreOptions<Tx = unknown> {
  /** The `TransactionHost` of `ClsPluginTransactional` (inject it in `UniqueJobsModule.forRootAsync`). */
  txHost: TransactionHostLike<Tx>;
  /**
   * The adapter of `@nestjs-cls/transactional` behind it: `'typeorm'` (`TransactionalAdapterTypeOrm`, PostgreSQL or
   * SQLite) or `'drizzle'` (`TransactionalAdapterDrizzleOrm`, PostgreSQL). Default: guessed from `txHost.tx`.
   */
  orm?: 'typeorm' | 'drizzle';
  /** The table of the records (see `SqlIdempotencyStoreOptions.table`). Default `'unique_jobs_idempotency'`. */
  table?: string;
  /**
   * The adapter's transaction options for transactional mode, e.g. `{ isolationLevel: 'REPEATABLE READ' }` (TypeORM) or
   * `{ isolationLevel: 'repeatable read' }` (Drizzle). Default: the plugin's `defaultTxOptions`.
   */
  transactionOptions?: unknown;
}

/** A TypeORM `EntityManager`, as far as the store reads it. */
interface EntityManagerLike {
  readonly queryRunner?: TypeOrmQueryRunnerLike;
  readonly dataSource?: TypeOrmDataSourceLike;
  readonly connection?: TypeOrmDataSourceLike;
}

/**
 * Idempotency records through `@nestjs-cls/transactional`: the claim's transaction is the `TransactionHost`'s. In
 * transactional mode the store opens it with `txHost.withTransaction('REQUIRES_NEW', …)` and runs the handler inside,
 * so every service method marked `@Transactional()` (default propagation `REQUIRED`) and every `txHost.tx` user the
 * handler calls joins the claim's transaction, with no change to their code, and commits with the completed record.
 * The record statements run on `txHost.tx` (in the transaction) or outside any (`withoutTransaction`).
 * `idempotencyOf(job).transaction` is `txHost.tx` as well (an `EntityManager`, or a Drizzle `tx`).
 *
 * Covered: the TypeORM adapter (PostgreSQL; SQLite through better-sqlite3, with `TypeOrmIdempotencyStore`'s
 * one-connection caveat) and the Drizzle adapter on node-postgres (Drizzle's SQLite transactions cannot await, so the
 * Drizzle adapter cannot run an async handler there). A dropped connection fails the attempt with
 * `IdempotencyConnectionLostError` and leaves the process running.
 *
 * ```ts
 * UniqueJobsModule.forRootAsync({
 *   inject: [TransactionHost],
 *   useFactory: async (txHost: TransactionHost<TransactionalAdapterTypeOrm>) => {
 *     const sql = new TransactionHostIdempotencyStore({ txHost });
 *     await sql.migrate();
 *     return { idempotency: { stores: { sql } } };
 *   },
 * });
 * ```
 */
export class TransactionHostIdempotencyStore<Tx = unknown> extends SqlIdempotencyStore<Tx> {
  constructor(options: TransactionHostIdempotencyStoreOptions<Tx>) {
    const txHost = options?.txHost;
    if (typeof txHost?.withTransaction !== 'function' || typeof txHost.withoutTransaction !== 'function') {
      throw new Error(
        'TransactionHostIdempotencyStore: options.txHost must be the TransactionHost of @nestjs-cls/transactional',
      );
    }
    super({
      adapter: transactionHostAdapter(txHost, options.orm, options.transactionOptions),
      table: options.table,
      name: 'transaction-host',
    });
  }
}

/** The adapter of {@link TransactionHostIdempotencyStore}. */
export function transactionHostAdapter<Tx>(
  txHost: TransactionHostLike<Tx>,
  orm: 'typeorm' | 'drizzle' | undefined,
  transactionOptions: unknown,
): SqlIdempotencyAdapter<Tx> {
  // Outside a transaction, txHost.tx is the adapter's non-transactional instance: an EntityManager or a Drizzle db.
  const kind = orm ?? guessOrm(txHost.tx);
  const dialect: SqlDialectName =
    kind === 'typeorm' ? typeOrmDialect(dataSourceOf(txHost.tx as EntityManagerLike).options.type) : 'postgres';
  const execute = (tx: unknown, statement: SqlStatement): Promise<SqlResult> =>
    kind === 'typeorm'
      ? executeOnManager(tx as EntityManagerLike, statement)
      : drizzlePgExecute(tx as DrizzlePgDatabaseLike, statement);
  return {
    dialect,
    execute: (statement) => txHost.withoutTransaction(() => execute(txHost.tx, statement)),
    transaction(body) {
      // What the transaction's connection is checked out of (TypeORM's pg pool, the pool under the Drizzle database):
      // watched from its checkout, before BEGIN. TypeORM listens on it too (and releases the runner); Drizzle does not.
      const base = txHost.tx;
      const source =
        kind === 'typeorm'
          ? (dataSourceOf(base as EntityManagerLike) as { driver?: { master?: unknown } }).driver?.master
          : drizzleClientOf(base);
      return openWatched(source, async (watch) => {
        try {
          return await txHost.withTransaction('REQUIRES_NEW', transactionOptions, () => {
            const tx = txHost.tx;
            // The transaction's pg client: TypeORM's runner's connection, or Drizzle's session client.
            const runner = (tx as { queryRunner?: { databaseConnection?: unknown } }).queryRunner;
            watch.adopt(kind === 'typeorm' ? runner?.databaseConnection : drizzleTransactionClient(tx));
            let over = false;
            if (kind === 'drizzle') guardLateStatements(tx, source, () => over);
            return body({
              handle: tx,
              execute: (statement) => execute(txHost.tx, statement),
              active: () => (runner ? typeOrmTransactionActive(runner as TypeOrmQueryRunnerLike) : true),
            }).finally(() => {
              over = true;
              // Before the adapter's own commit or rollback, which would fail on a transaction the handler ended.
              if (runner) forgetEndedTypeOrmTransaction(runner as TypeOrmQueryRunnerLike);
            });
          });
        } catch (error) {
          const lost = watch.lost();
          if (lost) {
            // Drizzle leaves a client whose BEGIN failed checked out; TypeORM releases its runner itself.
            if (kind === 'drizzle') watch.releaseStranded();
            throw new IdempotencyConnectionLostError(lost);
          }
          throw error;
        } finally {
          watch.stop();
        }
      });
    },
  };
}

/** `'typeorm'` for an `EntityManager`, `'drizzle'` for a Drizzle database. */
function guessOrm(tx: unknown): 'typeorm' | 'drizzle' {
  const candidate = tx as Partial<EntityManagerLike & DrizzlePgDatabaseLike> | undefined;
  if (candidate && (candidate.dataSource ?? candidate.connection)) return 'typeorm';
  if (typeof candidate?.execute === 'function' && typeof candidate.transaction === 'function') return 'drizzle';
  throw new Error(
    "TransactionHostIdempotencyStore: cannot tell the ORM of txHost.tx (an EntityManager or a Drizzle database): set options.orm to 'typeorm' or 'drizzle'",
  );
}

function dataSourceOf(manager: EntityManagerLike): TypeOrmDataSourceLike {
  const dataSource = manager?.dataSource ?? manager?.connection;
  if (!dataSource) throw new Error('TransactionHostIdempotencyStore: txHost.tx is not a TypeORM EntityManager');
  return dataSource;
}

/** A statement on an `EntityManager`: on its transaction's runner, or on a runner of its own outside one. */
async function executeOnManager(manager: EntityManagerLike, statement: SqlStatement): Promise<SqlResult> {
  if (manager.queryRunner) return typeOrmExecute(manager.queryRunner, statement);
  const runner = dataSourceOf(manager).createQueryRunner();
  try {
    return await typeOrmExecute(runner, statement);
  } finally {
    if (!runner.isReleased) await runner.release();
  }
}
