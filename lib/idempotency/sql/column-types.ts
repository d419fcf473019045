/**
 * The column types the PostgreSQL statements need. A table of the application's own migration may have every column
 * the store reads with a type that breaks it only at run time: a bounded `varchar` refuses a long result after the
 * handler's effect ran (the claim is then run again at every attempt); a `timestamp` without time zone is read in each
 * session's `TimeZone`, so a process in another zone takes a live claim over, or replays nothing of a completed one.
 */
const EXPECTED: Readonly<Record<string, readonly string[]>> = {
  ...Object.fromEntries(
    ['scope', 'key', 'state', 'owner', 'job_id', 'fingerprint', 'result', 'error'].map((column) => [
      column,
      ['text', 'character varying'],
    ]),
  ),
  attempts: ['integer', 'bigint'],
  created_at: ['timestamp with time zone'],
  expires_at: ['timestamp with time zone'],
  updated_at: ['timestamp with time zone'],
};

/**
 * The columns of `rows` (`{ name, type }`, see `SqlDialect.columnTypes`) whose type the store cannot use, as
 * `result is character varying(16) (needs text)`; empty when every one is fine (missing columns are the probe's).
 */
export function wrongColumnTypes(rows: readonly Record<string, unknown>[]): string[] {
  return rows.flatMap(({ name, type }) => {
    const allowed = EXPECTED[String(name)];
    return allowed && !allowed.includes(String(type)) ? [`${String(name)} is ${String(type)} (needs ${allowed[0]})`] : [];
  });
}

/** The bootstrap error of a table with columns of the wrong types (`label`: the store's class). */
export function wrongColumnTypesError(label: string, table: string, wrong: readonly string[]): Error {
  return new Error(
    `${label}: its table "${table}" has columns of types the store cannot use: ${wrong.join(', ')}. ` +
      `Change them (\`ALTER TABLE … ALTER COLUMN … TYPE …\`), or create the table as ` +
      `\`PostgresIdempotencyStore.migrationSql('${table}')\` does`,
  );
}
