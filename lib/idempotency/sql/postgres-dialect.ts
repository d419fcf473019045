import { ABANDONED_CLAIM_MS, type SqlTableName } from './sql-records.js';
import { postgresMigration } from './postgres-migration.js';
import { postgresTableChecks } from './postgres-table-checks.js';
import { CLAIM_LOCK_TIMEOUT_MS, command, query, LATER_STEP_PREFIX, type SqlDialect } from './sql-dialect.js';

/** The columns of a record as `toIdempotencyRecord` reads them, times in ms since the epoch. */
const RECORD_COLUMNS = `scope, key, state, owner, job_id, fingerprint, result, error, attempts,
  floor(extract(epoch from created_at) * 1000)::float8 AS created_at_ms,
  floor(extract(epoch from expires_at) * 1000)::float8 AS expires_at_ms`;

/** {@link ABANDONED_CLAIM_MS} as an interval. */
const ABANDONED_INTERVAL = `interval '${ABANDONED_CLAIM_MS} milliseconds'`;

/** `$n` milliseconds as an interval. */
function ms(parameter: number): string {
  return `($${parameter}::float8 * interval '1 millisecond')`;
}

/**
 * The statements on PostgreSQL. Every time (lease ends, retention ends, creation) is the database's clock
 * (`clock_timestamp()`), so the clocks of the processes sharing the table never matter.
 */
export function postgresDialect(table: SqlTableName): SqlDialect {
  const t = table.quoted;
  const owned = `scope = $1 AND key = $2 AND owner = $3 AND state = 'in_progress'`;
  // One statement: inserts, or overwrites a record that is no longer live. No row back: a live record stopped it.
  // A takeover (replacing an in_progress record) counts one more attempt and keeps created_at, so attempts > 1
  // tells exactly that the claim was a takeover.
  // A record locked by a live transaction (a transactional holder's) stops the claim after CLAIM_LOCK_TIMEOUT_MS
  // (`lock_timeout` set for this statement's own transaction only, before the insert meets the row lock).
  // In transactional mode the claim's commit does not wait for its WAL flush (`synchronous_commit` off for its own
  // transaction only): the handler's transaction, which completes the record, commits with a flush that makes the
  // claim durable too (WAL is flushed in order), and a claim lost in a crash had no completion to lose. One WAL flush
  // per job instead of two.
  const claimSettings = (asynchronous: boolean) =>
    [
      `set_config('lock_timeout', '${CLAIM_LOCK_TIMEOUT_MS}ms', true) AS lt`,
      ...(asynchronous ? [`set_config('synchronous_commit', 'off', true) AS sc`] : []),
    ].join(', ');
  // When a claim overwrites the record it met: no longer live, and not an ended claim of another payload. (The table
  // keeps a job's id, not its queue: a job id alone cannot tell the job that claimed from one of another queue sharing
  // the scope, so payloads are compared whoever claims; see IdempotencyStore.claim.)
  const takeoverAllowed = `cur.expires_at <= excluded.updated_at
      AND (cur.state <> 'in_progress' OR cur.fingerprint IS NULL OR excluded.fingerprint IS NULL
        OR cur.fingerprint = excluded.fingerprint
        OR cur.expires_at <= excluded.updated_at - ${ABANDONED_INTERVAL})`;
  // Inserts the record of a claim in `state`; `from` (with the clock as `n`) and `where` choose whether.
  const insertRecord = (state: 'in_progress' | 'completed', from: string, where: string) => `INSERT INTO ${t} AS cur
      (scope, key, state, owner, job_id, fingerprint, result, error, attempts, created_at, expires_at, updated_at)
    SELECT $1, $2, '${state}', $3, $4, $5, NULL, NULL, 1, n.now, n.now + ${ms(6)}, n.now
    FROM ${from} WHERE ${where}`;
  // A record handed over between two steps of the claiming job (owned by its resume token, `resume`): the job's own,
  // taken over live, keeping the fingerprint it was first claimed with; an in-progress one says so in `result` (no result
  // while in progress: the token, see LATER_STEP_PREFIX), which the claim returns as `resumed`.
  const resumedBy = (resume: string) => `cur.state = 'in_progress' AND cur.owner = ${resume}`;
  // The ended claim of a delivery of the same job (its token in `result`) that had resumed one, taken over after its
  // worker died mid-step: still a later step (BullMQ delivers the job again at the step its data names): `laterStep`.
  const laterStepOf = (resume: string) =>
    `(cur.state = 'in_progress' AND cur.result IN (${resume}, '${LATER_STEP_PREFIX}' || ${resume}))`;
  // Inserts the record in `state`, or overwrites one the claim may take over (or, given `resume`, resumes).
  const upsert = (
    state: 'in_progress' | 'completed',
    from: string,
    where = 'true',
    resume?: string,
  ) => `${insertRecord(state, from, where)}
    ON CONFLICT (scope, key) DO UPDATE SET
      state = '${state}',
      owner = excluded.owner,
      job_id = excluded.job_id,
      fingerprint = ${resume ? `CASE WHEN ${resumedBy(resume)} THEN cur.fingerprint ELSE excluded.fingerprint END` : 'excluded.fingerprint'},
      result = ${resume && state === 'in_progress' ? `CASE WHEN ${resumedBy(resume)} THEN ${resume} WHEN ${laterStepOf(resume)} THEN '${LATER_STEP_PREFIX}' || ${resume} END` : 'NULL'},
      error = NULL,
      attempts = CASE WHEN cur.state = 'in_progress' THEN cur.attempts + 1 ELSE 1 END,
      created_at = CASE WHEN cur.state = 'in_progress' THEN cur.created_at ELSE excluded.created_at END,
      expires_at = excluded.expires_at,
      updated_at = excluded.updated_at
    WHERE ${resume ? `(${resumedBy(resume)}) OR (${takeoverAllowed})` : takeoverAllowed}
    RETURNING cur.attempts > 1 AS takeover, coalesce(cur.result = ${resume ?? 'NULL'}, false) AS resumed,
      coalesce(cur.result = '${LATER_STEP_PREFIX}' || ${resume ?? 'NULL'}, false) AS later_step`;
  const now = '(SELECT clock_timestamp() AS now) AS n';
  const claimStatement = (asynchronous: boolean) => `WITH cfg AS MATERIALIZED (SELECT ${claimSettings(asynchronous)})
    ${upsert('in_progress', `${now}, cfg`, 'true', '$7::text')}`;
  const claim = claimStatement(false);
  const claimBeforeTransaction = claimStatement(true);
  // The claim inside the handler's transaction, the record written completed. The advisory lock (transaction-scoped,
  // taken without waiting) tells claimants of this mode apart while the record is not committed; a live record is
  // looked up before the upsert, so that a duplicate never waits on, nor writes, the row lock of the record that stops
  // it.
  const keyLock = `hashtextextended('${t.replace(/'/g, "''")}:' || length($1::text) || ':' || $1::text || $2::text, 0)`;
  // (A record parked for the claiming job, `$7` its resume token, does not stop it: the job resumes it.)
  const liveRow = `SELECT 1 FROM ${t} WHERE scope = $1 AND key = $2 AND expires_at > n.now
    AND NOT (state = 'in_progress' AND coalesce(owner = $7::text, false))`;
  // The same claim for a key with no record yet, the usual case: a plain insert under the advisory lock, which costs
  // PostgreSQL less than the conditional upsert below (measured with pgbench: ~1.2x the transactions per second). A
  // record in the way (or the lock held elsewhere) inserts nothing and the full statement decides. The insert is not
  // even tried over a record this transaction can see, live or not: it would wait for any other transaction changing
  // that row, where the full statement answers a live record at once.
  const freshInTransaction = `${insertRecord(
    'completed',
    now,
    `pg_try_advisory_xact_lock(${keyLock}) AND NOT EXISTS (SELECT 1 FROM ${t} WHERE scope = $1 AND key = $2)`,
  )}
    ON CONFLICT (scope, key) DO NOTHING
    RETURNING txid_current()::text AS tx`;
  // `resumed`: the record the claim overwrote was parked for the claiming job (read before the upsert, same snapshot).
  const inTransaction = `WITH lk AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(${keyLock}) AS got),
    pk AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM ${t} WHERE scope = $1 AND key = $2 AND state = 'in_progress'
      AND owner = $7::text) AS parked),
    ins AS (${upsert('completed', `lk, ${now}`, `lk.got AND NOT EXISTS (${liveRow})`, '$7::text')}, txid_current()::text AS tx)
    SELECT lk.got, ins.takeover, ins.tx, (ins.tx IS NOT NULL AND pk.parked) AS resumed
    FROM lk CROSS JOIN pk LEFT JOIN ins ON true`;
  // Whether the claim's record is where the completion looks (same snapshot as its update): not when the handler
  // deleted it, or moved the table's name with a SET search_path of the session (a schema per tenant).
  const present = `EXISTS (SELECT 1 FROM ${t} WHERE scope = $1 AND key = $2 AND owner = $3)`;
  const finishClaimed = `WITH u AS (UPDATE ${t} SET result = $4, expires_at = clock_timestamp() + ${ms(5)},
      updated_at = clock_timestamp()
    WHERE scope = $1 AND key = $2 AND owner = $3 AND txid_current_if_assigned() = $6::bigint
      AND ($4::text IS NOT NULL OR expires_at < clock_timestamp() + ${ms(5)} / 2)
    RETURNING 1)
    SELECT coalesce(txid_current_if_assigned() = $6::bigint, false) AS ours, (SELECT count(*) FROM u) AS updated,
      ${present} AS present`;
  // finishClaimed for a step of a step job: the record the claim wrote is handed over to the job's resume token ($4)
  // for $5 ms, in progress, instead of completed.
  const handOverClaimed = `WITH u AS (UPDATE ${t} SET state = 'in_progress', owner = $4, result = NULL,
      expires_at = clock_timestamp() + ${ms(5)}, updated_at = clock_timestamp()
    WHERE scope = $1 AND key = $2 AND owner = $3 AND txid_current_if_assigned() = $6::bigint
    RETURNING 1)
    SELECT coalesce(txid_current_if_assigned() = $6::bigint, false) AS ours, (SELECT count(*) FROM u) AS updated,
      ${present} AS present`;
  const failUnclaimed = `INSERT INTO ${t} AS cur
      (scope, key, state, owner, job_id, fingerprint, result, error, attempts, created_at, expires_at, updated_at)
    SELECT $1, $2, 'failed', $3, $4, $5, NULL, $6, 1, n.now, n.now + ${ms(7)}, n.now
    FROM (SELECT clock_timestamp() AS now) AS n WHERE pg_try_advisory_xact_lock(${keyLock})
    ON CONFLICT (scope, key) DO UPDATE SET state = 'failed', owner = excluded.owner, job_id = excluded.job_id,
      fingerprint = excluded.fingerprint, result = NULL, error = excluded.error, attempts = 1,
      created_at = excluded.created_at, expires_at = excluded.expires_at, updated_at = excluded.updated_at
    WHERE cur.expires_at <= excluded.updated_at OR ($8::boolean AND cur.owner = excluded.owner)
      OR (cur.state = 'in_progress' AND cur.owner = $9::text)`;
  const keyHeld = `SELECT NOT pg_try_advisory_xact_lock(${keyLock}) AS held`;
  // What stopped a claim: the live record, or an ended claim of another payload (not taken over: a mismatch).
  const blocking = `SELECT ${RECORD_COLUMNS},
      greatest(0, ceil(extract(epoch from (expires_at - n.now)) * 1000))::float8 AS expires_in_ms
    FROM ${t}, (SELECT clock_timestamp() AS now) AS n
    WHERE scope = $1 AND key = $2 AND (expires_at > n.now
      OR (state = 'in_progress' AND fingerprint <> $3 AND expires_at > n.now - ${ABANDONED_INTERVAL}))`;
  const live = `SELECT ${RECORD_COLUMNS},
      greatest(0, ceil(extract(epoch from (expires_at - n.now)) * 1000))::float8 AS expires_in_ms
    FROM ${t}, (SELECT clock_timestamp() AS now) AS n
    WHERE scope = $1 AND key = $2 AND expires_at > n.now`;
  const current = `SELECT ${RECORD_COLUMNS},
      greatest(0, ceil(extract(epoch from (expires_at - n.now)) * 1000))::float8 AS expires_in_ms
    FROM ${t}, (SELECT clock_timestamp() AS now) AS n
    WHERE scope = $1 AND key = $2`;
  const renew = `UPDATE ${t} SET expires_at = clock_timestamp() + ${ms(4)}, updated_at = clock_timestamp()
    WHERE ${owned}`;
  const handOver = `UPDATE ${t} SET owner = $5, expires_at = clock_timestamp() + ${ms(4)}, updated_at = clock_timestamp()
    WHERE ${owned}`;
  const settle = (state: 'completed' | 'failed') => `UPDATE ${t}
    SET state = '${state}', result = ${state === 'completed' ? '$4' : 'NULL'}, error = ${state === 'failed' ? '$4' : 'NULL'},
      expires_at = clock_timestamp() + ${ms(5)}, updated_at = clock_timestamp()
    WHERE ${owned}`;
  const complete = settle('completed');
  const fail = settle('failed');
  const release = `DELETE FROM ${t} WHERE ${owned}`;
  // The transaction's id: the completion checks it, so that it never commits outside the transaction that locked the
  // record (a handler that ran COMMIT or ROLLBACK itself leaves the connection in autocommit, or in another transaction).
  const lockOwned = `SELECT txid_current()::text AS tx FROM ${t} WHERE ${owned} FOR UPDATE`;
  const completeLocked = `${complete} AND txid_current() = $6::bigint`;
  const handOverLocked = `${handOver} AND txid_current() = $6::bigint`;
  const transactionState = `SELECT CASE WHEN txid_current_if_assigned() = $1::bigint THEN 'open'
    ELSE txid_status($1::bigint) END AS state`;
  const remove = `DELETE FROM ${t} WHERE scope = $1 AND key = $2 RETURNING expires_at > clock_timestamp() AS live`;
  // Rows a transaction holds are skipped, not waited for; the index on expires_at bounds the scan.
  const prune = `DELETE FROM ${t} WHERE ctid IN (SELECT ctid FROM ${t}
    WHERE expires_at <= clock_timestamp()
      AND (state <> 'in_progress' OR expires_at <= clock_timestamp() - ${ABANDONED_INTERVAL})
    LIMIT $1 FOR UPDATE SKIP LOCKED)`;
  // SKIP LOCKED does not wait: a row that exists but is skipped is held by a transaction.
  const rowLocked = `SELECT EXISTS (SELECT 1 FROM ${t} WHERE scope = $1 AND key = $2)
    AND NOT EXISTS (SELECT 1 FROM ${t} WHERE scope = $1 AND key = $2 FOR UPDATE SKIP LOCKED) AS locked`;
  const checks = postgresTableChecks(table);
  const ownedParams = (ref: { scope: string; key: string; owner: string }) => [ref.scope, ref.key, ref.owner];
  return {
    name: 'postgres',
    claim: (r) =>
      query(r.transactional ? claimBeforeTransaction : claim, [
        r.scope,
        r.key,
        r.owner,
        jobIdText(r.jobId),
        r.fingerprint ?? null,
        r.leaseMs,
        r.resumeOwner ?? null,
      ]),
    claimFreshInTransaction: (r, ttlMs) =>
      query(freshInTransaction, [r.scope, r.key, r.owner, jobIdText(r.jobId), r.fingerprint ?? null, ttlMs]),
    claimInTransaction: (r, ttlMs) =>
      query(inTransaction, [
        r.scope,
        r.key,
        r.owner,
        jobIdText(r.jobId),
        r.fingerprint ?? null,
        ttlMs,
        r.resumeOwner ?? null,
      ]),
    finishClaimed: (ref, c, tx) =>
      c.handover
        ? query(handOverClaimed, [...ownedParams(ref), c.handover.owner, c.handover.leaseMs, tx])
        : query(finishClaimed, [...ownedParams(ref), c.result ?? null, c.ttlMs, tx]),
    failUnclaimed: (r, f, ownCommitted) =>
      command(failUnclaimed, [
        r.scope,
        r.key,
        r.owner,
        jobIdText(r.jobId),
        r.fingerprint ?? null,
        f.error,
        f.ttlMs,
        ownCommitted,
        r.resumeOwner ?? null,
      ]),
    keyHeld: (scope, key) => query(keyHeld, [scope, key]),
    // 40001: serialization_failure; 26000: invalid_sql_statement_name (a prepared statement gone: DISCARD ALL); 0A000:
    // a prepared statement whose rows changed type (the table altered: "cached plan must not change result type").
    claimAgain: (error) => ['40001', '26000', '0A000'].includes(sqlState(error) ?? ''),
    blocking: (c) => query(blocking, [c.scope, c.key, c.fingerprint ?? null]),
    live: (scope, key) => query(live, [scope, key]),
    current: (scope, key) => query(current, [scope, key]),
    // 55P03: the claim's lock_timeout. 57014: a statement_timeout of the application's (its pool's, its role's),
    // which cancels the claim whether it waited on the row lock (shorter than the lock_timeout) or was slow for
    // another reason: a lock only if rowLocked says so.
    lockBusy: (error) => {
      const code = sqlState(error);
      return code === '55P03' ? 'locked' : code === '57014' ? 'cancelled' : false;
    },
    rowLocked: (scope, key) => query(rowLocked, [scope, key]),
    renew: (ref, leaseMs) => command(renew, [...ownedParams(ref), leaseMs]),
    handOver: (ref, h) => command(handOver, [...ownedParams(ref), h.leaseMs, h.owner]),
    complete: (ref, c) => command(complete, [...ownedParams(ref), c.result ?? null, c.ttlMs]),
    fail: (ref, f) => command(fail, [...ownedParams(ref), f.error, f.ttlMs]),
    release: (ref) => command(release, ownedParams(ref)),
    lockOwned: (ref) => query(lockOwned, ownedParams(ref)),
    completeLocked: (ref, c, tx) =>
      c.handover
        ? command(handOverLocked, [...ownedParams(ref), c.handover.leaseMs, c.handover.owner, tx])
        : command(completeLocked, [...ownedParams(ref), c.result ?? null, c.ttlMs, tx]),
    transactionState: (_ref, tx) => query(transactionState, [tx]),
    delete: (scope, key) => query(remove, [scope, key]),
    prune: (limit) => command(prune, [limit]),
    probe: checks.probe,
    columnTypes: checks.columnTypes,
    migration: () => postgresMigration(table),
    migrated: checks.migrated,
    migrationLock: () =>
      query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`nestjs-unique-jobs:migrate:${table.quoted}`]),
  };
}

/** The SQLSTATE of a database error, through the wrappers of ORMs (TypeORM copies it, Drizzle keeps it as `cause`). */
function sqlState(error: unknown): string | undefined {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown; driverError?: unknown }).driverError ?? (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * A job id as PostgreSQL can store it: `text` holds no NUL character, which a BullMQ job id may (every claim of such a
 * job would fail). NUL is written as the six characters `\u0000`; the column only tells people which job held a key.
 */
function jobIdText(jobId: string | undefined): string | null {
  return jobId === undefined ? null : jobId.replaceAll('\0', '\\u0000');
}
