import { DEFAULT_IDEMPOTENCY_TABLE } from './sql-records.js';
import type { SqlDialectName } from './sql-adapter.interface.js';
import { connectionCut, networkError } from './network-error.js';

/**
 * The bootstrap error of a SQL store whose check of its table failed (`label`: the store's class): the database out of
 * reach, the connection cut under every attempt, or the table missing (with what creates it).
 */
export function verifyFailure(
  error: unknown,
  label: string,
  table: string,
  dialect: SqlDialectName,
  attempts: number,
): Error {
  // The database's own words: ORMs wrap its error (Drizzle: "Failed query: …", the original as `cause`).
  let root: unknown = error;
  while (hasMessage(root) && hasMessage(root.cause)) root = root.cause;
  const reason = hasMessage(root) ? root.message : String(root);
  const unreachable = networkError(error);
  if (unreachable) {
    const where = unreachable.address ? ` at ${unreachable.address}:${unreachable.port}` : '';
    return new Error(
      `${label} cannot reach its database${where} (${unreachable.code}: ${unreachable.message}): is the database running, and do the connection options (host, port) name it?`,
      { cause: error },
    );
  }
  if (connectionCut(error)) {
    return new Error(
      `${label} lost its connection while checking its table "${table}", ${attempts} times (${reason}): is the database restarting, or ending sessions?`,
      { cause: error },
    );
  }
  const file = `node_modules/nestjs-unique-jobs/sql/${DEFAULT_IDEMPOTENCY_TABLE}.${dialect}.sql`;
  const sqlClass = dialect === 'postgres' ? 'PostgresIdempotencyStore' : 'SqliteIdempotencyStore';
  if (noConflictTarget(error) || noConflictTarget(root)) {
    return new Error(
      `${label}: its table "${table}" has every column but no primary key on (scope, key), which every claim needs (${reason}). ` +
        `Add it (\`ALTER TABLE … ADD PRIMARY KEY (scope, key)\` on PostgreSQL; SQLite cannot add one: recreate the table), ` +
        `or create the table as \`${sqlClass}.migrationSql('${table}')\` does`,
      { cause: error },
    );
  }
  if (missingColumn(error) || missingColumn(root)) {
    return new Error(
      `${label}: its table "${table}" lacks a column the store uses (${reason}). \`migrate()\` does not change a table ` +
        `that exists: add the column as \`${sqlClass}.migrationSql('${table}')\` defines it, or recreate the table`,
      { cause: error },
    );
  }
  return new Error(
    `${label} cannot read its table "${table}" (${reason}). Create the table before the application starts, with one of: ` +
      `(1) \`await store.migrate()\` where the store is created (e.g. in the useFactory of UniqueJobsModule.forRootAsync); ` +
      `(2) the TypeORM migration \`typeOrmIdempotencyMigration({ table: '${table}' })\` (\`UniqueJobsIdempotencyMigration\` for the default table) in your DataSource's migrations; ` +
      `(3) the SQL of \`${sqlClass}.migrationSql('${table}')\`, or for the default table the file ${file}`,
    { cause: error },
  );
}

/**
 * The claims' `ON CONFLICT (scope, key)` matches no unique index: PostgreSQL's SQLSTATE 42P10, SQLite's own words (an
 * adapter may quote the statement in its message, which then holds "ON CONFLICT" whatever went wrong).
 */
function noConflictTarget(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return (
    code === '42P10' ||
    (typeof message === 'string' && message.includes('ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE'))
  );
}

/** A column the probe reads is not in the table: PostgreSQL's SQLSTATE 42703, SQLite's own words. */
function missingColumn(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === '42703' || (typeof message === 'string' && /^no such column: /.test(message));
}

/** An error, whatever realm made it (`instanceof Error` fails across realms). */
function hasMessage(value: unknown): value is { message: string; cause?: unknown } {
  return typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string';
}
