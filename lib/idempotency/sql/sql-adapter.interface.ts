/**
 * How {@link SqlIdempotencyStore} reaches a database: through an adapter that runs one statement, in a transaction or
 * outside one. The store owns the SQL (the one-statement claim, the compare-and-set updates, the record lock of
 * transactional mode); an adapter only says how to open a transaction and how to run a statement with parameters on
 * the connection or ORM the application already has. The built-in adapters: a `pg` pool, a `better-sqlite3` database,
 * a TypeORM `DataSource`, a Drizzle database, and `@nestjs-cls/transactional`'s `TransactionHost`.
 *
 * A Prisma adapter, for example, is about twenty lines: `execute` calls `prisma.$queryRawUnsafe(text, ...params)`
 * (statements that return rows) or `$executeRawUnsafe` (the others, which answer the count of changed rows), and
 * `transaction` calls `prisma.$transaction(async (tx) => body({ handle: tx, execute: <the same on tx> }), { timeout })`.
 */
export interface SqlIdempotencyAdapter<Transaction = unknown> {
  /**
   * The SQL dialect of the database: `'postgres'` statements number their parameters `$1`, `$2`, …; `'sqlite'`
   * statements use `?`, one value per `?` in order.
   */
  readonly dialect: SqlDialectName;

  /**
   * Runs one statement outside any transaction (autocommit): once it resolves, every other connection sees its effect.
   * Used for claims, renewals, completions of plain mode, releases, reads, deletes and pruning.
   */
  execute(statement: SqlStatement): Promise<SqlResult>;

  /**
   * Opens a transaction on one connection, runs `body` with a scope bound to it, commits when `body` resolves and rolls
   * back when it rejects (then rejects with `body`'s error, whatever the rollback did). The connection goes back to its
   * pool afterwards, discarded if it broke.
   *
   * A connection that drops while the transaction is open (a failover, `pg_terminate_backend`,
   * `idle_in_transaction_session_timeout`) must never surface as an unhandled `'error'` event, which would end the
   * process: the adapter listens for it, lets `body` finish, and rejects with `IdempotencyConnectionLostError` (the
   * database rolled the transaction back when the connection ended).
   *
   * SQLite adapters need no more than `BEGIN`: the store's first statement in the transaction is a write, which takes
   * the database's write lock (waiting on the busy timeout) before anything is read.
   */
  transaction<R>(body: (scope: SqlTransactionScope<Transaction>) => Promise<R>): Promise<R>;

  /**
   * Optional: `true` when {@link transaction} rejects if the database rolled the transaction back at `COMMIT` (on
   * PostgreSQL, a `COMMIT` of a transaction a failed statement aborted answers `ROLLBACK`, not an error: the adapter
   * must read that answer). Otherwise, in transactional mode, the store asks the database after each `COMMIT` whether
   * the transaction committed (one statement more per job): an ORM that commits for the adapter says nothing of it.
   */
  readonly confirmsCommit?: boolean;
}

/** The SQL dialects the store speaks. */
export type SqlDialectName = 'postgres' | 'sqlite';

/** One statement and its parameters. */
export interface SqlStatement {
  /** The SQL text, with positional placeholders: `$1`, `$2`, … (PostgreSQL) or `?` (SQLite). */
  readonly text: string;
  /** The parameter values, in placeholder order: strings, numbers and `null`. */
  readonly params: readonly unknown[];
  /** Whether the statement answers rows (a `SELECT`, or a statement with `RETURNING`). */
  readonly returnsRows: boolean;
}

/** What a statement answered. */
export interface SqlResult {
  /** The rows of a statement that returns rows (column name → value); `[]` otherwise. */
  rows: Record<string, unknown>[];
  /** How many rows the statement changed (or returned); `0` when the driver does not say. */
  rowCount: number;
}

/** A transaction opened by {@link SqlIdempotencyAdapter.transaction}. */
export interface SqlTransactionScope<Transaction> {
  /**
   * What the handler receives as `idempotencyOf(job).transaction`: the ORM's transaction object (a TypeORM
   * `EntityManager`, a Drizzle `tx`), or a client bound to the transaction (a `pg` client, the SQLite database).
   */
  readonly handle: Transaction;
  /** Runs one statement in the transaction. */
  execute(statement: SqlStatement): Promise<SqlResult>;
  /**
   * Optional: whether the transaction is still open by the driver's own account (`false` once something committed or
   * rolled it back: better-sqlite3's `inTransaction`, TypeORM's `isTransactionActive`). The store asks before it
   * completes the record, and never completes it outside its transaction. Without it the store relies on its own check
   * (PostgreSQL: the transaction id; SQLite: a marker a rollback removes), which also sees a rollback followed by a new
   * `BEGIN`.
   */
  active?(): boolean;
  /**
   * Optional: `true` only when the adapter saw every statement the connection ran since it opened the transaction,
   * and none ended it (`COMMIT`, `ROLLBACK`) or left it aborted (a failed statement). Then the store may skip its own
   * check that the transaction is still the one it opened (PostgreSQL: one statement per job). `false` or `undefined`:
   * the store checks.
   */
  intact?(): boolean | undefined;
}
