import { DEFAULT_IDEMPOTENCY_TABLE, parseTableName, quoteIdentifier, type SqlTableName } from './sql-records.js';

/**
 * The DDL of the PostgreSQL record table and of its index on `expires_at` (used to prune), `IF NOT EXISTS`.
 *
 * @param store Names the store in the error thrown for an invalid table name.
 */
export function postgresMigrationSql(table: string = DEFAULT_IDEMPOTENCY_TABLE, store = 'PostgresIdempotencyStore') {
  return postgresMigration(parseTableName(table, store)).join('\n');
}

/** The DDL statements of {@link postgresMigrationSql}, one each. */
export function postgresMigration(table: SqlTableName): string[] {
  // An index name cannot be schema-qualified: PostgreSQL puts it in the table's schema.
  const index = quoteIdentifier(`${table.name}_expires_at_idx`);
  return [
    `CREATE TABLE IF NOT EXISTS ${table.quoted} (
  scope text NOT NULL,
  key text NOT NULL,
  state text NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
  owner text,
  job_id text,
  fingerprint text,
  result text,
  error text,
  attempts integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (scope, key)
);`,
    `CREATE INDEX IF NOT EXISTS ${index} ON ${table.quoted} (expires_at);
`,
  ];
}

/** The index on `expires_at`, qualified with the table's schema (for a catalog lookup). */
export function indexOf(table: SqlTableName): string {
  const index = quoteIdentifier(`${table.name}_expires_at_idx`);
  return table.schema === undefined ? index : `${quoteIdentifier(table.schema)}.${index}`;
}
