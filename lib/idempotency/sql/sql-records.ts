import type { IdempotencyRecord, IdempotencyState } from '../idempotency-store.interface.js';

/** The default table of the SQL idempotency stores. */
export const DEFAULT_IDEMPOTENCY_TABLE = 'unique_jobs_idempotency';

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** A validated table name, split and quoted for SQL text. */
export interface SqlTableName {
  /** The schema, when the name is schema-qualified. */
  schema: string | undefined;
  /** The table name without its schema. */
  name: string;
  /** The quoted, possibly schema-qualified, table identifier. */
  quoted: string;
}

/** Quotes an identifier already checked against the table-name pattern (no quote characters can occur). */
export function quoteIdentifier(identifier: string): string {
  return `"${identifier}"`;
}

/**
 * Checks a table name (`table` or `schema.table`: letters, digits, underscores, not starting with a digit) and quotes
 * it. Throws an Error naming the store for anything else, so no SQL text is ever built from an unchecked name.
 */
export function parseTableName(table: unknown, store: string): SqlTableName {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new Error(
      `${store}: invalid table name ${JSON.stringify(table)}: use letters, digits and underscores (not starting with a digit), optionally schema-qualified as "schema.table"`,
    );
  }
  const [first, second] = table.split('.');
  const schema = second === undefined ? undefined : first;
  const name = second ?? first;
  return {
    schema,
    name,
    quoted: schema === undefined ? quoteIdentifier(name) : `${quoteIdentifier(schema)}.${quoteIdentifier(name)}`,
  };
}

/**
 * The columns both SQL stores select, aliased the same way: times come as milliseconds since the epoch, as numbers.
 */
export interface SqlRecordRow {
  scope: string;
  key: string;
  state: string;
  owner: string | null;
  job_id: string | null;
  fingerprint: string | null;
  result: string | null;
  error: string | null;
  attempts: number | bigint | string;
  created_at_ms: number | bigint | string;
  expires_at_ms: number | bigint | string;
}

/** Maps a selected row to an {@link IdempotencyRecord}. */
export function toIdempotencyRecord(row: SqlRecordRow): IdempotencyRecord {
  return {
    scope: row.scope,
    key: row.key,
    state: row.state as IdempotencyState,
    owner: row.owner ?? undefined,
    jobId: row.job_id ?? undefined,
    fingerprint: row.fingerprint ?? undefined,
    // An in-progress record's `result` is no result (SQLite: the marker of the transaction holding it).
    result: row.state === 'completed' ? (row.result ?? undefined) : undefined,
    error: row.error ?? undefined,
    attempts: Number(row.attempts),
    createdAt: Number(row.created_at_ms),
    expiresAt: Number(row.expires_at_ms),
  };
}

/** How many times a `claim` retries when the record that stopped it vanished before it could be read. */
export const CLAIM_ATTEMPTS = 5;

/** The error a `claim` throws when the record kept vanishing between its upsert and its read. */
export function claimRaceError(store: string, scope: string, key: string): Error {
  return new Error(
    `${store}: could not claim idempotency key "${key}" (scope "${scope}"): its record kept changing during ${CLAIM_ATTEMPTS} attempts`,
  );
}

/**
 * How long after its lease ended an `in_progress` record still refuses a takeover by a different payload (a claim
 * whose fingerprint differs; on the Redis store, of a job the record does not name): that delivery fails as a mismatch
 * instead of running. Past this, the claim counts as
 * abandoned and any payload may take the key. The Redis store keeps in-progress records exactly this long.
 */
export const ABANDONED_CLAIM_MS = 600_000;
