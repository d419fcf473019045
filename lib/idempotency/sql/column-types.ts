/**
 * The column types the PostgreSQL statements need. A table of the application's own migration may have every column
 * the store reads with a type that breaks it only at run time: a `varchar(n)` too short refuses a long result after the
 * handler's effect ran (the claim is then run again at every attempt); a `timestamp` without time zone is read in each
 * session's `TimeZone`, so a process in another zone takes a live claim over, or replays nothing of a completed one.
 * Each entry: the type the migration gives, and whether a found type (as `format_type` spells it) does as well.
 */
const TEXT = (min?: number) => ({
  needs: 'text',
  fits: (type: string) => {
    if (type === 'text' || type === 'character varying') return true;
    const bounded = /^character varying\((\d+)\)$/.exec(type);
    return min !== undefined && bounded !== null && Number(bounded[1]) >= min;
  },
});
/** A time kept to the millisecond at least, with its time zone. */
const TIME = {
  needs: 'timestamp with time zone',
  fits: (type: string) => {
    const match = /^timestamp(?:\((\d)\))? with time zone$/.exec(type);
    return match !== null && (match[1] === undefined || Number(match[1]) >= 3);
  },
};
const EXPECTED: Readonly<Record<string, { needs: string; fits: (type: string) => boolean }>> = {
  // A stored key or scope is at most 255 characters (MAX_IDEMPOTENCY_KEY_LENGTH; longer ones are stored hashed).
  scope: TEXT(255),
  key: TEXT(255),
  state: TEXT('in_progress'.length),
  // An attempt's UUID (36 characters) or a job's resume token ('step:' and a base64url sha256: 48).
  owner: TEXT(48),
  job_id: TEXT(),
  // 'v1:' and a base64url sha256.
  fingerprint: TEXT(46),
  result: TEXT(),
  error: TEXT(),
  attempts: { needs: 'integer', fits: (type) => type === 'integer' || type === 'bigint' },
  created_at: TIME,
  expires_at: TIME,
  updated_at: TIME,
};

/**
 * The columns of `rows` (`{ name, type, required }`, see `SqlDialect.columnTypes`) the store cannot use, as
 * `result is character varying(16) (needs text)`, and columns of the application's own that every insert of the store
 * would leave NULL against a NOT NULL; empty when every one is fine (missing columns are the probe's).
 */
export function wrongColumnTypes(rows: readonly Record<string, unknown>[]): string[] {
  return rows.flatMap(({ name, type, required }) => {
    const expected = EXPECTED[String(name)];
    // A column of the application's own that the store's inserts leave NULL: every claim would fail.
    if (!expected)
      return required === true ? [`${String(name)} is NOT NULL with no default (the store never sets it)`] : [];
    return expected.fits(String(type)) ? [] : [`${String(name)} is ${String(type)} (needs ${expected.needs})`];
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
