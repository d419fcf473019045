-- nestjs-unique-jobs: the idempotency record table (SQLite), as SqliteIdempotencyStore.migrationSql() and
-- store.migrate() create it. For another table name, use SqliteIdempotencyStore.migrationSql(table).
CREATE TABLE IF NOT EXISTS "unique_jobs_idempotency" (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
  owner TEXT,
  job_id TEXT,
  fingerprint TEXT,
  result TEXT,
  error TEXT,
  attempts INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS "unique_jobs_idempotency_expires_at_idx" ON "unique_jobs_idempotency" (expires_at);
