import type {
  IdempotencyClaim,
  IdempotencyClaimResult,
  IdempotencyCompletion,
  IdempotencyFailure,
  IdempotencyHandover,
  IdempotencyRecord,
  IdempotencyRecordRef,
  IdempotencyStore,
  IdempotencyTransactionalClaim,
  IdempotencyTransactionResult,
  TransactionClaim,
} from '../idempotency-store.interface.js';
import { claimThenTransaction } from '../claim-then-transaction.js';
import { claimInTransaction, claimsInTransaction, RolledBackClaims } from './claim-in-transaction.js';
import { claimOutsideTransaction } from './claim-outside-transaction.js';
import { DEFAULT_IDEMPOTENCY_TABLE, parseTableName, toIdempotencyRecord, type SqlRecordRow } from './sql-records.js';
import type { SqlIdempotencyAdapter, SqlResult, SqlStatement } from './sql-adapter.interface.js';
import { affected, type SqlDialect } from './sql-dialect.js';
import { runLocked } from './locked-transaction.js';
import { postgresDialect } from './postgres-dialect.js';
import { againOnCut, CUT_ATTEMPTS } from './network-error.js';
import { verifyFailure } from './verify-failure.js';
import { wrongColumnTypes, wrongColumnTypesError } from './column-types.js';
import { SerialQueue } from './serial-queue.js';
import { truthy } from './claim-locks.js';
import { sqliteDialect } from './sqlite-dialect.js';

/** Options of {@link SqlIdempotencyStore}. */
export interface SqlIdempotencyStoreOptions<Transaction = unknown> {
  /** How the store reaches the database: see {@link SqlIdempotencyAdapter}. */
  adapter: SqlIdempotencyAdapter<Transaction>;
  /**
   * The table of the records, optionally schema-qualified (`'jobs.idempotency'`). Letters, digits and underscores
   * only. Default `'unique_jobs_idempotency'`.
   */
  table?: string;
  /** The store's short name in messages. Default: the adapter's dialect (`'postgres'` or `'sqlite'`). */
  name?: string;
}

/**
 * Idempotency records in a SQL table (PostgreSQL or SQLite), reached through an {@link SqlIdempotencyAdapter}: the
 * statements are the store's, the connection, the transaction and the ORM are the application's. The PostgreSQL,
 * SQLite, TypeORM, Drizzle and `@nestjs-cls/transactional` stores are this class with their adapter; build one on
 * another client (Prisma, Kysely, Knex) with an adapter of your own.
 *
 * Create the table with {@link SqlIdempotencyStore.migrate} at startup, or with your own migrations (see
 * docs/idempotency.md): the module checks it at bootstrap ({@link SqlIdempotencyStore.verify}). Records that are no
 * longer live stay in the table until a claim of the same key overwrites them or `prune` deletes them (the orphan
 * reaper does, every minute).
 *
 * In transactional mode ({@link SqlIdempotencyStore.runInTransaction}) the handler receives the adapter's transaction
 * handle: write through it, and its writes commit together with the completed record.
 *
 * On SQLite a connection is one transaction at a time, so every operation of the store goes through one in-process
 * queue, held by a transaction from its first statement to its end: transactional handlers are serialized per store.
 */
export class SqlIdempotencyStore<Transaction = unknown> implements IdempotencyStore<Transaction> {
  /** @inheritDoc */
  readonly name: string;
  /** @inheritDoc */
  readonly handsOverInTransaction = true;
  /** The record table, as given (default `'unique_jobs_idempotency'`). */
  readonly table: string;

  private readonly adapter: SqlIdempotencyAdapter<Transaction>;
  private readonly sql: SqlDialect;
  /** The in-process queue every operation goes through (SQLite). */
  private readonly queue: SerialQueue | undefined;
  /** Claims inside a transaction that rolled back, until the runner releases or fails them. */
  private readonly rolledBack = new RolledBackClaims();

  constructor(options: SqlIdempotencyStoreOptions<Transaction>) {
    const label = new.target.name;
    const adapter = options?.adapter;
    if (typeof adapter?.execute !== 'function' || typeof adapter.transaction !== 'function') {
      throw new Error(`${label}: options.adapter must be a SqlIdempotencyAdapter (with execute() and transaction())`);
    }
    this.adapter = adapter;
    this.table = options.table ?? DEFAULT_IDEMPOTENCY_TABLE;
    const table = parseTableName(this.table, label);
    if (adapter.dialect === 'postgres') this.sql = postgresDialect(table);
    else if (adapter.dialect === 'sqlite') this.sql = sqliteDialect(table);
    else throw new Error(`${label}: adapter.dialect must be 'postgres' or 'sqlite' (got ${String(adapter.dialect)})`);
    this.name = options.name ?? adapter.dialect;
    this.queue = adapter.dialect === 'sqlite' ? new SerialQueue() : undefined;
  }

  /**
   * Creates the table and its index if they do not exist, in one transaction. Safe to call from several processes at
   * once (PostgreSQL serializes them under an advisory lock on the table name; SQLite serializes writers). A connection
   * cut under it (its `COMMIT`'s answer lost included: committed or not, nobody can tell) is met by running it again on
   * another connection, a few times, since it only creates what is missing.
   */
  async migrate(): Promise<void> {
    await againOnCut(() => this.migrateOnce());
  }

  private async migrateOnce(): Promise<void> {
    const migrated = this.sql.migrated?.();
    if (migrated && (await this.run(migrated)).rows[0]?.done === true) return;
    const ddl = this.sql.migration().map((text) => ({ text, params: [], returnsRows: false }));
    const lock = this.sql.migrationLock();
    await this.exclusive(async () => {
      // SQLite: one statement at a time (each is atomic, `IF NOT EXISTS`), so a transaction never waits on another
      // connection of this very process for the write lock.
      if (!lock) for (const statement of ddl) await this.adapter.execute(statement);
      else {
        await this.adapter.transaction(async (tx) => {
          await tx.execute(lock);
          for (const statement of ddl) await tx.execute(statement);
        });
      }
    });
  }

  /**
   * Checks that the table exists, has every column the store uses (a `SELECT … LIMIT 0`), of types it can use
   * (PostgreSQL: read from the catalog), and its primary key on `(scope, key)` (the claims' `INSERT … ON CONFLICT`,
   * planned). The module calls it at bootstrap, before any worker takes a job. Throws an Error saying what is missing
   * or wrong and how to create it.
   */
  async verify(): Promise<void> {
    // A connection cut under the check (a failover, `pg_terminate_backend`, a server restarting) says nothing of the
    // table: look again on another connection, a few times, before failing the bootstrap.
    const types = this.sql.columnTypes?.();
    let wrong: string[] = [];
    try {
      await againOnCut(async () => {
        for (const statement of this.sql.probe()) await this.run(statement);
        if (types) wrong = wrongColumnTypes((await this.run(types)).rows);
      });
    } catch (error) {
      throw verifyFailure(error, this.constructor.name, this.table, this.sql.name, CUT_ATTEMPTS);
    }
    if (wrong.length > 0) throw wrongColumnTypesError(this.constructor.name, this.table, wrong);
  }

  /** @inheritDoc */
  async claim(request: IdempotencyClaim): Promise<IdempotencyClaimResult> {
    return this.exclusive(
      () => claimOutsideTransaction(this.adapter, this.sql, request, this.constructor.name),
      false,
      (result) => result.claimed,
    );
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, leaseMs: number): Promise<boolean> {
    return this.changed(this.sql.renew(ref, leaseMs));
  }

  /** @inheritDoc */
  async handOver(ref: IdempotencyRecordRef, handover: IdempotencyHandover): Promise<boolean> {
    // A claim inside a transaction that rolled back: the rollback put back what it overwrote, which is the job's own
    // handover when it resumed one (a later step of a step job, retried): parked again, for the new lease.
    if (this.rolledBack.take(ref.owner))
      return this.changed(this.sql.handOver({ ...ref, owner: handover.owner }, handover));
    return this.changed(this.sql.handOver(ref, handover));
  }

  /** @inheritDoc */
  async complete(ref: IdempotencyRecordRef, completion: IdempotencyCompletion): Promise<boolean> {
    return this.changed(this.sql.complete(ref, completion));
  }

  /** @inheritDoc */
  async fail(ref: IdempotencyRecordRef, failure: IdempotencyFailure): Promise<boolean> {
    const rolledBack = this.rolledBack.take(ref.owner);
    if (rolledBack && this.sql.failUnclaimed) {
      return this.changed(this.sql.failUnclaimed(rolledBack.request, failure, rolledBack.ownCommitted));
    }
    return this.changed(this.sql.fail(ref, failure));
  }

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef): Promise<boolean> {
    // A claim inside a transaction that rolled back: released by the rollback, which put back what it overwrote: the
    // job's own handover when it resumed one (a later step of a step job that failed for good), released too.
    const rolledBack = this.rolledBack.take(ref.owner);
    if (rolledBack) {
      const { resumeOwner } = rolledBack.request;
      if (resumeOwner !== undefined) await this.changed(this.sql.release({ ...ref, owner: resumeOwner }));
      return true;
    }
    return this.changed(this.sql.release(ref));
  }

  /** @inheritDoc */
  async get(scope: string, key: string): Promise<IdempotencyRecord | undefined> {
    const { rows } = await this.run(this.sql.live(scope, key));
    return rows[0] ? toIdempotencyRecord(rows[0] as unknown as SqlRecordRow) : undefined;
  }

  /** Deletes the key's record whatever its state. `true` if a live one existed (an expired one counts as absent). */
  async delete(scope: string, key: string): Promise<boolean> {
    const { rows } = await this.run(this.sql.delete(scope, key));
    return rows.some((row) => truthy(row.live));
  }

  /** @inheritDoc */
  async prune(limit: number): Promise<number> {
    return (await this.run(this.sql.prune(limit))).rowCount;
  }

  /**
   * Opens a transaction through the adapter, locks the owner's record (PostgreSQL: `SELECT … FOR UPDATE`; SQLite: the
   * write lock), runs `work` with the adapter's transaction handle, then completes the owner's record in the same
   * transaction and commits. If the owner lost its claim (another delivery took it over), the transaction rolls back
   * and {@link IdempotencyLeaseLostError} is thrown; if `work` or `completion` throws, it rolls back and that error is
   * thrown; if the connection dropped meanwhile, {@link IdempotencyConnectionLostError} is thrown. Do not commit, roll
   * back or release the transaction in `work`: the record is completed only inside the transaction that locked it, so
   * a `work` that ended it gets {@link IdempotencyTransactionEndedError} and no completed record. A `work` that
   * committed the transaction and then threw gets that error too (`'committed'`, its own error as `cause`), not its
   * own: its writes are committed, so the key is kept failed rather than released for a retry that would write again.
   */
  async runInTransaction<T>(
    ref: IdempotencyRecordRef,
    work: (transaction: Transaction) => Promise<T>,
    completion: (value: T) => IdempotencyCompletion,
  ): Promise<T> {
    const elsewhere = this.queue ? undefined : (statement: SqlStatement) => this.adapter.execute(statement);
    return this.exclusive(() => runLocked(this.adapter, this.sql, ref, work, completion, elsewhere), true);
  }

  /**
   * The claim inside the handler's transaction (see {@link IdempotencyStore.claimInTransaction}). PostgreSQL: one
   * transaction of four statements and the work's, the record written `completed` by the claim and invisible to others
   * until it commits. SQLite: {@link claim}, then {@link runInTransaction}.
   */
  async claimInTransaction<T>(
    request: IdempotencyTransactionalClaim,
    work: (transaction: Transaction, claim: TransactionClaim) => Promise<T>,
    completion: (value: T) => IdempotencyCompletion,
  ): Promise<IdempotencyTransactionResult<T>> {
    if (claimsInTransaction(this.sql)) {
      return claimInTransaction(this.adapter, this.sql, this.rolledBack, request, work, completion);
    }
    return claimThenTransaction(this, request, work, completion);
  }

  private async changed(statement: SqlStatement): Promise<boolean> {
    return affected(statement, await this.run(statement));
  }

  private run(statement: SqlStatement): Promise<SqlResult> {
    return this.exclusive(() => this.adapter.execute(statement));
  }

  /** SQLite: runs `operation` in the store's {@link SerialQueue}. PostgreSQL: runs it now. */
  private exclusive<T>(operation: () => Promise<T>, urgent = false, pauseAfter?: (value: T) => boolean): Promise<T> {
    return this.queue ? this.queue.run(operation, urgent, pauseAfter) : operation();
  }
}
