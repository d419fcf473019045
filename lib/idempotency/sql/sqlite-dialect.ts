import { randomUUID } from 'node:crypto';
import {
  ABANDONED_CLAIM_MS,
  DEFAULT_IDEMPOTENCY_TABLE,
  parseTableName,
  quoteIdentifier,
  type SqlTableName,
} from './sql-records.js';
import type { SqlStatement } from './sql-adapter.interface.js';
import { command, LATER_STEP_PREFIX, query, RECORD_TABLE_COLUMNS, type SqlDialect } from './sql-dialect.js';

/**
 * The DDL of the SQLite record table and of its index on `expires_at` (used to prune), `IF NOT EXISTS`.
 *
 * @param store Names the store in the error thrown for an invalid table name.
 */
export function sqliteMigrationSql(table: string = DEFAULT_IDEMPOTENCY_TABLE, store = 'SqliteIdempotencyStore') {
  return sqliteMigration(parseTableName(table, store)).join('\n');
}

/** The DDL statements of {@link sqliteMigrationSql}, one each. */
export function sqliteMigration(table: SqlTableName): string[] {
  // SQLite qualifies the index name with the schema, and the table must be in that same schema.
  const indexName = quoteIdentifier(`${table.name}_expires_at_idx`);
  const index = table.schema === undefined ? indexName : `${quoteIdentifier(table.schema)}.${indexName}`;
  return [
    `CREATE TABLE IF NOT EXISTS ${table.quoted} (
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
);`,
    `CREATE INDEX IF NOT EXISTS ${index} ON ${quoteIdentifier(table.name)} (expires_at);
`,
  ];
}

/**
 * A statement written with `@name` parameters, turned into `?` placeholders (what every SQLite driver accepts) and the
 * list of names in placeholder order; `bind` gives the values.
 */
function named(text: string, returnsRows: boolean): (values: Record<string, unknown>) => SqlStatement {
  const names: string[] = [];
  const positional = text.replace(/@([A-Za-z]+)/g, (_match, name: string) => {
    names.push(name);
    return '?';
  });
  return (values) => {
    const params = names.map((name) => {
      if (!(name in values)) throw new Error(`SQLite statement parameter @${name} has no value`);
      return values[name];
    });
    return returnsRows ? query(positional, params) : command(positional, params);
  };
}

/**
 * The statements on SQLite. Times are milliseconds of `Date.now()`: SQLite is embedded, so every process sharing the
 * file reads the same host clock.
 */
export function sqliteDialect(table: SqlTableName): SqlDialect {
  const t = table.quoted;
  const columns = `scope, key, state, owner, job_id, fingerprint, result, error, attempts,
    created_at AS created_at_ms, expires_at AS expires_at_ms`;
  const owned = `scope = @scope AND key = @key AND owner = @owner AND state = 'in_progress'`;
  // A record handed over between two steps of the claiming job (owned by its resume token): the job's own, taken over
  // live, keeping the fingerprint it was first claimed with, and saying so in `result` (the token: see
  // LATER_STEP_PREFIX), which the claim returns as `resumed`.
  const resumed = `state = 'in_progress' AND owner = @resumeOwner`;
  // The ended claim of a delivery of the same job (its token in `result`) that had resumed one, taken over after its
  // worker died mid-step: still a later step (`laterStep`).
  const laterStep = `state = 'in_progress' AND result IN (@resumeOwner, '${LATER_STEP_PREFIX}' || @resumeOwner)`;
  // One statement: inserts, or overwrites a record that is no longer live (SET expressions read the old row). No row
  // back: a live record stopped it. A takeover counts one more attempt and keeps created_at, so attempts > 1 tells
  // exactly that the claim replaced an in_progress record. An ended claim of another payload is not taken over (the
  // table keeps a job's id, not its queue: payloads are compared whoever claims; see IdempotencyStore.claim).
  const claim = named(
    `INSERT INTO ${t}
      (scope, key, state, owner, job_id, fingerprint, result, error, attempts, created_at, expires_at, updated_at)
    VALUES (@scope, @key, 'in_progress', @owner, @jobId, @fingerprint, NULL, NULL, 1, @now, @expiresAt, @now)
    ON CONFLICT (scope, key) DO UPDATE SET
      state = 'in_progress',
      owner = excluded.owner,
      job_id = excluded.job_id,
      fingerprint = CASE WHEN ${resumed} THEN fingerprint ELSE excluded.fingerprint END,
      result = CASE WHEN ${resumed} THEN @resumeOwner WHEN ${laterStep} THEN '${LATER_STEP_PREFIX}' || @resumeOwner END,
      error = NULL,
      attempts = CASE WHEN state = 'in_progress' THEN attempts + 1 ELSE 1 END,
      created_at = CASE WHEN state = 'in_progress' THEN created_at ELSE excluded.created_at END,
      expires_at = excluded.expires_at,
      updated_at = excluded.updated_at
    WHERE (${resumed}) OR (expires_at <= excluded.updated_at
      AND (state <> 'in_progress' OR fingerprint IS NULL OR excluded.fingerprint IS NULL
        OR fingerprint = excluded.fingerprint
        OR expires_at <= excluded.updated_at - ${ABANDONED_CLAIM_MS}))
    RETURNING attempts > 1 AS takeover, coalesce(result = @resumeOwner, 0) AS resumed,
      coalesce(result = '${LATER_STEP_PREFIX}' || @resumeOwner, 0) AS later_step`,
    true,
  );
  // What stopped a claim: the live record, or an ended claim of another payload (not taken over: a mismatch).
  const blocking = named(
    `SELECT ${columns}, max(0, expires_at - @now) AS expires_in_ms FROM ${t}
    WHERE scope = @scope AND key = @key AND (expires_at > @now
      OR (state = 'in_progress' AND fingerprint <> @fingerprint AND expires_at > @now - ${ABANDONED_CLAIM_MS}))`,
    true,
  );
  const live = named(
    `SELECT ${columns}, expires_at - @now AS expires_in_ms FROM ${t}
    WHERE scope = @scope AND key = @key AND expires_at > @now`,
    true,
  );
  const current = named(
    `SELECT ${columns}, max(0, expires_at - @now) AS expires_in_ms FROM ${t} WHERE scope = @scope AND key = @key`,
    true,
  );
  const renew = named(`UPDATE ${t} SET expires_at = @expiresAt, updated_at = @now WHERE ${owned}`, false);
  const handOver = named(
    `UPDATE ${t} SET owner = @to, expires_at = @expiresAt, updated_at = @now WHERE ${owned}`,
    false,
  );
  const completeText = `UPDATE ${t}
    SET state = 'completed', result = @result, error = NULL, expires_at = @expiresAt, updated_at = @now
    WHERE ${owned}`;
  const complete = named(completeText, false);
  // Only while the record holds the transaction's marker: a ROLLBACK (by the handler) undid it.
  const completeLocked = named(`${completeText} AND result = @tx`, false);
  // completeLocked for a step of a step job: handed over to the job's resume token instead, the marker cleared.
  const handOverLocked = named(
    `UPDATE ${t} SET owner = @to, result = NULL, expires_at = @expiresAt, updated_at = @now
    WHERE ${owned} AND result = @tx`,
    false,
  );
  const fail = named(
    `UPDATE ${t}
    SET state = 'failed', result = NULL, error = @error, expires_at = @expiresAt, updated_at = @now
    WHERE ${owned}`,
    false,
  );
  const release = named(`DELETE FROM ${t} WHERE ${owned}`, false);
  // A write, so the transaction holds SQLite's write lock from its first statement, whatever its BEGIN was. It marks
  // the record with a token of the transaction (in `result`, empty while in progress): a rollback removes it.
  const lockOwned = named(`UPDATE ${t} SET result = @tx WHERE ${owned} RETURNING result AS tx`, true);
  const transactionState = named(
    `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${t} WHERE ${owned} AND result = @tx) THEN 'open' ELSE 'aborted' END AS state`,
    true,
  );
  const remove = named(
    `DELETE FROM ${t} WHERE scope = @scope AND key = @key RETURNING expires_at > @now AS live`,
    true,
  );
  const prune = named(
    `DELETE FROM ${t} WHERE rowid IN (SELECT rowid FROM ${t}
    WHERE expires_at <= @now AND (state <> 'in_progress' OR expires_at <= @now - ${ABANDONED_CLAIM_MS}) LIMIT @limit)`,
    false,
  );
  const ownedValues = (ref: { scope: string; key: string; owner: string }) => ({
    scope: ref.scope,
    key: ref.key,
    owner: ref.owner,
  });
  return {
    name: 'sqlite',
    claim: (r) => {
      const now = Date.now();
      return claim({
        scope: r.scope,
        key: r.key,
        owner: r.owner,
        jobId: r.jobId ?? null,
        fingerprint: r.fingerprint ?? null,
        resumeOwner: r.resumeOwner ?? null,
        now,
        expiresAt: now + r.leaseMs,
      });
    },
    blocking: (c) => blocking({ scope: c.scope, key: c.key, fingerprint: c.fingerprint ?? null, now: Date.now() }),
    live: (scope, key) => live({ scope, key, now: Date.now() }),
    current: (scope, key) => current({ scope, key, now: Date.now() }),
    renew: (ref, leaseMs) => {
      const now = Date.now();
      return renew({ ...ownedValues(ref), now, expiresAt: now + leaseMs });
    },
    handOver: (ref, h) => {
      const now = Date.now();
      return handOver({ ...ownedValues(ref), to: h.owner, now, expiresAt: now + h.leaseMs });
    },
    complete: (ref, c) => {
      const now = Date.now();
      return complete({ ...ownedValues(ref), result: c.result ?? null, now, expiresAt: now + c.ttlMs });
    },
    fail: (ref, f) => {
      const now = Date.now();
      return fail({ ...ownedValues(ref), error: f.error, now, expiresAt: now + f.ttlMs });
    },
    release: (ref) => release(ownedValues(ref)),
    lockOwned: (ref) => lockOwned({ ...ownedValues(ref), tx: `tx:${randomUUID()}` }),
    completeLocked: (ref, c, tx) => {
      const now = Date.now();
      if (c.handover) {
        const { owner: to, leaseMs } = c.handover;
        return handOverLocked({ ...ownedValues(ref), to, now, expiresAt: now + leaseMs, tx });
      }
      return completeLocked({ ...ownedValues(ref), result: c.result ?? null, now, expiresAt: now + c.ttlMs, tx });
    },
    transactionState: (ref, tx) => transactionState({ ...ownedValues(ref), tx }),
    delete: (scope, key) => remove({ scope, key, now: Date.now() }),
    prune: (limit) => prune({ now: Date.now(), limit }),
    probe: () => [
      query(`SELECT ${RECORD_TABLE_COLUMNS} FROM ${t} LIMIT 0`, []),
      // EXPLAIN compiles the claim's ON CONFLICT without running it: no write lock to wait for while another process
      // holds the database's (an INSERT of no row would take it).
      query(`EXPLAIN INSERT INTO ${t} (scope, key) VALUES ('', '') ON CONFLICT (scope, key) DO NOTHING`, []),
    ],
    workSavepoint: {
      open: command('SAVEPOINT unique_jobs_work', []),
      release: command('RELEASE SAVEPOINT unique_jobs_work', []),
      rollback: command('ROLLBACK TO SAVEPOINT unique_jobs_work', []),
    },
    migration: () => sqliteMigration(table),
    migrationLock: () => undefined,
  };
}
