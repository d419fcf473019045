-- nestjs-unique-jobs: the idempotency record table (PostgreSQL), as PostgresIdempotencyStore.migrationSql() and
-- store.migrate() create it. For another table name, use PostgresIdempotencyStore.migrationSql(table).
CREATE TABLE IF NOT EXISTS "unique_jobs_idempotency" (
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
);
CREATE INDEX IF NOT EXISTS "unique_jobs_idempotency_expires_at_idx" ON "unique_jobs_idempotency" (expires_at);
