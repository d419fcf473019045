// Session 35's hostile review of the day's diff (1efe74c..6c1f230): the 'later step' claim answer, the Drizzle late-
// statement guard, and the other changes, each against real Redis and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DelayedError, type Job } from 'bullmq';
import { sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { randomUUID } from 'node:crypto';
import {
  DrizzleIdempotencyStore,
  PostgresIdempotencyStore,
  RedisIdempotencyStore,
  type IdempotencyClaim,
  type IdempotencyStore,
} from '../../lib/index.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { useApps } from '../support/apps.js';
import { waitFor } from '../support/wait.js';
import { Outcomes } from '../support/outcomes.js';
import { workerOf } from '../conflicts/helpers.js';
import { byId, digestOf, runningKey, runtimeOwner } from '../support/locks.js';
import { isParkedScore } from '../../lib/locks/lock-marks.js';
import { resumeOwnerOf } from '../../lib/idempotency/step-handover.js';
import { captureLogger } from '../support/events.js';
import { byKey } from '../support/step-stores.js';
import { redisClient, scanKeys, deleteKeys, uniqueName } from '../support/redis.js';

const SHORT_LEASE_MS = 150;

/** Claims until the claim is won (a record whose lease has to end first is waited for, as long as it says). */
async function claimOnceEnded(store: IdempotencyStore, request: IdempotencyClaim) {
  for (;;) {
    const answer = await store.claim(request);
    if (answer.claimed) return answer;
    await new Promise((resolve) => setTimeout(resolve, Math.max(answer.expiresInMs, 0) + 5));
  }
}

/**
 * A step job (`job`) whose second step resumed the handover of its first, for a short lease, and whose worker died
 * mid-step: the record is left in progress, resumed.
 */
async function leaveResumedStepBehind(
  store: IdempotencyStore,
  key: string,
  job: { jobId: string; jobKey: string; jobCreatedAt: number },
) {
  const resumeOwner = `step:${randomUUID()}`;
  const base = { scope: 's', key, leaseMs: 60_000, fingerprint: 'f', ...job, resumeOwner };
  const first = { ...base, owner: randomUUID() };
  expect(await store.claim(first)).toEqual({ claimed: true, takeover: false });
  expect(await store.handOver!(first, { owner: resumeOwner, leaseMs: 60_000 })).toBe(true);
  const second = { ...base, owner: randomUUID(), leaseMs: SHORT_LEASE_MS };
  expect(await store.claim(second)).toEqual({ claimed: true, takeover: true, resumed: true });
  return resumeOwner;
}

describe('a later step stays a later step: which claim answers resumed', () => {
  const pool = pgPool(2);
  const table = uniqueTable('idem_s35_later');
  const postgres = new PostgresIdempotencyStore({ pool, table });
  const redis = redisClient({ lazyConnect: true });
  const prefix = uniqueName('s35-later');
  const onRedis = new RedisIdempotencyStore({ client: redis, prefix });
  beforeAll(async () => {
    await postgres.migrate();
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
    await deleteKeys(redis, await scanKeys(redis, `${prefix}*`));
    redis.disconnect();
  });

  // Job ids are per queue ("5" in each) and a producer's custom id is given again to a new job once the first is gone:
  // the PostgreSQL and SQLite tables keep only the id, so the first build of the rule (by job id) answered another job
  // of the same id, key and payload, taking over the ended claim of a resumed step, as a later step of its own. The
  // record now keeps the job's resume token (its Redis key and creation time), as Redis tells the job.
  it.each([
    ['PostgreSQL', () => postgres],
    ['Redis', () => onRedis],
  ])('%s: another job of the same id (another queue, or a custom id reused) is no later step', async (_, of) => {
    const store = of();
    const key = `other-job-${randomUUID()}`;
    await leaveResumedStepBehind(store, key, { jobId: '5', jobKey: 'bull:qa:5', jobCreatedAt: 1_700_000_000_000 });
    const other = {
      scope: 's',
      key,
      owner: randomUUID(),
      leaseMs: 60_000,
      fingerprint: 'f',
      jobId: '5',
      jobKey: 'bull:qb:5', // another queue's job "5" (or a later job given the same custom id)
      jobCreatedAt: 1_700_000_999_000,
      resumeOwner: `step:${randomUUID()}`,
    };
    expect(await claimOnceEnded(store, other)).toEqual({ claimed: true, takeover: true });
  });

  // The same job's takeover after its worker died mid-step answered {takeover: true, resumed: true}, exactly what a
  // live resume of a handover answers: the runner (idempotency.runner.ts, `claim.takeover && !claim.resumed`) could not
  // tell them apart, and reported no takeover for a step whose previous delivery died mid-run. It answers `laterStep`.
  it.each([
    ['Redis', () => onRedis],
    ['PostgreSQL', () => postgres],
  ])('%s: the crashed step’s takeover is a takeover of a later step, not a resume', async (_, of) => {
    const store = of();
    const key = `same-job-${randomUUID()}`;
    const job = { jobId: '7', jobKey: `bull:q:${randomUUID()}`, jobCreatedAt: 1_700_000_000_000 };
    const resumeOwner = await leaveResumedStepBehind(store, key, job);
    const again = { scope: 's', key, owner: randomUUID(), leaseMs: SHORT_LEASE_MS, fingerprint: 'f', ...job };
    expect(await claimOnceEnded(store, { ...again, resumeOwner })).toEqual({
      claimed: true,
      takeover: true,
      laterStep: true,
    });
    // Dies again mid-step: still a later step.
    const third = { ...again, owner: randomUUID(), resumeOwner };
    expect(await claimOnceEnded(store, third)).toEqual({ claimed: true, takeover: true, laterStep: true });
  });
});

// 124ffe3 wraps the Drizzle transaction's pg client so that a statement after the handler's end is refused, letting
// Drizzle's own commit OR rollback through once. Drizzle (node-postgres session.transaction) sends `rollback` after a
// `commit` that failed (a deferred constraint, a serialization failure at commit): that rollback was refused and its
// refusal replaced the commit's error.
describe('DrizzleIdempotencyStore on PostgreSQL, transactional: a COMMIT that fails', () => {
  const pool = pgPool(2);
  const db: NodePgDatabase = drizzle(pool);
  const table = uniqueTable('idem_s35_commit');
  const parents = uniqueTable('fx_s35_parent');
  const children = uniqueTable('fx_s35_child');
  const store = new DrizzleIdempotencyStore({ db, table });
  beforeAll(async () => {
    await store.migrate();
    await pool.query(`CREATE TABLE ${parents} (id int PRIMARY KEY)`);
    await pool.query(`CREATE TABLE ${children} (parent int REFERENCES ${parents} (id) DEFERRABLE INITIALLY DEFERRED)`);
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${children}, ${parents}, ${table}`);
    await pool.end();
  });

  it('fails the attempt with the COMMIT’s own error (the deferred foreign key), nothing committed', async () => {
    const key = `deferred-${randomUUID()}`;
    const claim = {
      scope: 's',
      key,
      owner: randomUUID(),
      leaseMs: 60_000,
      fingerprint: 'f',
      jobId: '1',
      ttlMs: 60_000,
    };
    let kept: typeof db | undefined;
    const answer = store.claimInTransaction(
      claim,
      async (tx) => {
        kept = tx;
        // Checked at COMMIT only: no parent 42.
        await kept.execute(sql`INSERT INTO ${sql.raw(children)} (parent) VALUES (42)`);
        return 'done';
      },
      (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
    );
    // Before the fix: "Failed query: rollback" (the guard refused Drizzle's rollback after its failed commit).
    // (Drizzle wraps it: "Failed query: commit", pg's foreign_key_violation as its cause.)
    await expect(answer).rejects.toMatchObject({
      message: expect.stringContaining('Failed query: commit'),
      cause: { code: '23503' },
    });
    // Drizzle released the client: a late `rollback` or `commit` on the kept tx is refused, as any late statement.
    const refused = { cause: { message: expect.stringContaining('after that transaction ended') } };
    await expect(kept!.execute(sql.raw('rollback'))).rejects.toMatchObject(refused);
    await expect(kept!.execute(sql.raw('commit'))).rejects.toMatchObject(refused);
    expect((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${children}`)).rows[0].n).toBe('0');
    expect(await store.get('s', key)).toBeUndefined();
  });
});

// 65b7cda: the completion checks that the claim's record is where it looks. Its error advised SET LOCAL, which moves
// the table's name for the rest of the transaction too, where the completion runs: it fails alike.
describe('PostgresIdempotencyStore, transactional: SET LOCAL search_path onto a tenant schema with the record table', () => {
  const pool = pgPool(1);
  const table = uniqueTable('idem_s35_local');
  const tenant = uniqueTable('tenant_s35');
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS public.${table}`);
    await pool.query(`DROP SCHEMA IF EXISTS ${tenant} CASCADE`);
    await pool.end();
  });

  it('fails the attempt, and the error advises a schema-qualified table, not SET LOCAL', async () => {
    await pool.query(`CREATE SCHEMA ${tenant}`);
    await pool.query(PostgresIdempotencyStore.migrationSql(`${tenant}.${table}`));
    const store = new PostgresIdempotencyStore({ pool, table });
    await store.migrate();
    const answer = store.claimInTransaction(
      { scope: 's', key: 'k', owner: randomUUID(), leaseMs: 60_000, fingerprint: 'f', jobId: '1', ttlMs: 60_000 },
      async (client) => {
        await client.query(`SET LOCAL search_path TO ${tenant}, public`);
        return 'charged';
      },
      (result) => ({ result: JSON.stringify(result), ttlMs: 60_000 }),
    );
    await expect(answer).rejects.toThrow('The completion did not find the record the claim wrote');
    // Before: "(use SET LOCAL, or give the store a schema-qualified table)".
    await expect(answer).rejects.toThrow(/SET LOCAL too: .*give the store a schema-qualified table/);
  });
});

// 8b1ce26: a guarded job.changeDelay/promote on a queue with @IdempotencyKey also calls the idempotency store (one
// handOver, for every job of the queue, stepping or not). When that store failed (PostgreSQL out of reach, the table
// renamed here), the user's changeDelay rejected with the store's error although BullMQ had moved the job. Fixed: the
// move resolves, and a warning names the handover left as it was.
describe('a guarded job.changeDelay on a queue whose @IdempotencyKey store (PostgreSQL) fails', () => {
  const { start } = useApps('s35d-retime');
  const pool = pgPool(2);
  const table = uniqueTable('idem_s35_retime');
  const store = new PostgresIdempotencyStore({ pool, table });
  beforeAll(async () => {
    await store.migrate();
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}, ${table}_gone`);
    await pool.end();
  });

  it('a plain delayed job (no step, nothing parked): changeDelay is applied and resolves; the failure is a warning', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({
      module: { logger, idempotency: { stores: { sql: store } } },
      idempotency: { key: byKey, store: 'sql' },
      handler: async () => 'done',
    });
    const job = await app.queue.add('charge', { key: `k-${randomUUID()}` }, { delay: 60_000 });
    await pool.query(`ALTER TABLE ${table} RENAME TO ${table}_gone`);
    try {
      // Before the fix: rejected with the store's 42P01, for a move BullMQ had made.
      await expect((await app.queue.getJob(job.id!))!.changeDelay(120_000)).resolves.toBeUndefined();
      expect(lines.warn.filter((line) => line.includes('could not follow its new run time'))).toHaveLength(1);
      expect((await app.queue.getJob(job.id!))!.delay).toBe(120_000);
    } finally {
      await pool.query(`ALTER TABLE ${table}_gone RENAME TO ${table}`);
    }
    await (await app.queue.getJob(job.id!))!.remove();
  });
});

// 3b26fbf: parkForRetry keeps R parked for a retried failure when the attempt re-entered a slot carrying the parked
// mark. The slot's owner is the job id: a new job given the id of a removed step job that had parked R (BullMQ's remove
// leaves it to the orphan reaper) re-enters it at its FIRST step, and a plain failure of it kept R for the backoff. A
// first delivery (BullMQ's attemptsStarted 1) is no later step now, whatever slot it re-entered.
describe('parkForRetry: a first step re-entering the parked R of a removed job of the same custom id', () => {
  const { redis, start } = useApps('s35d-park-reuse');

  it('gives R back after a plain failure of the first step, as any first step does', async () => {
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync', onConflict: 'log' },
      handler: async (job: Job<{ id: string; step?: number; fail?: boolean }>) => {
        if (job.data.fail && job.attemptsMade === 0) throw new Error('first attempt fails');
        if ((job.data.step ?? 1) === 1 && !job.data.fail) {
          await job.updateData({ ...job.data, step: 2 });
          await job.moveToDelayed(Date.now() + 60_000, job.token);
          throw new DelayedError();
        }
        return 'done';
      },
    });
    const outcomes = new Outcomes(workerOf(app));
    const running = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a' }));
    const id = uniqueName('custom');
    const stepping = await app.queue.add('sync', { id: 'a' }, { jobId: id });
    await waitFor('R parked', async () => isParkedScore(Number(await redis.zscore(running, runtimeOwner(app, id)))));
    await stepping.remove();
    // A new job given the same id, at its first step, fails once and is retried after a minute.
    await app.queue.add('sync', { id: 'a', fail: true }, { jobId: id, attempts: 2, backoff: 60_000 });
    await outcomes.failures(id);
    // Given back once the attempt failed (BullMQ records the failure after the library's work on it).
    await waitFor('R given back', async () => (await redis.zscore(running, runtimeOwner(app, id))) === null);
    await (await app.queue.getJob(id))!.remove();
  }, 30_000);
});

describe('PostgreSQL column-type check: domains', () => {
  const pool = pgPool(1);
  const table = uniqueTable('idem_s35_domain');
  const plain = uniqueTable('s35_text');
  const checked = uniqueTable('s35_checked');
  const short = uniqueTable('s35_short');
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    for (const domain of [plain, checked, short]) await pool.query(`DROP DOMAIN IF EXISTS ${domain}`);
    await pool.end();
  });

  it('accepts a domain over text without constraints, and the store works on it', async () => {
    await pool.query(`CREATE DOMAIN ${plain} AS text`);
    await pool.query(PostgresIdempotencyStore.migrationSql(table).replace('result text,', `result ${plain},`));
    const store = new PostgresIdempotencyStore({ pool, table });
    await expect(store.verify()).resolves.toBeUndefined();
    const claim = { scope: 's', key: 'k', owner: randomUUID(), leaseMs: 60_000, fingerprint: 'f', jobId: '1' };
    await expect(store.claim(claim)).resolves.toEqual({ claimed: true, takeover: false });
    await expect(store.complete(claim, { result: '"x"', ttlMs: 60_000 })).resolves.toBe(true);
    await expect(store.get('s', 'k')).resolves.toMatchObject({ state: 'completed', result: '"x"' });
    await pool.query(`DROP TABLE ${table}`);
  });

  it('refuses a domain with a CHECK (it may refuse what the store writes) and one over a short varchar', async () => {
    await pool.query(`CREATE DOMAIN ${checked} AS text CHECK (length(VALUE) < 4)`);
    await pool.query(`CREATE DOMAIN ${short} AS varchar(8)`);
    const ddl = PostgresIdempotencyStore.migrationSql(table)
      .replace('result text,', `result ${checked},`)
      .replace('error text,', `error ${short},`);
    await pool.query(ddl);
    const store = new PostgresIdempotencyStore({ pool, table });
    const refused = store.verify();
    await expect(refused).rejects.toThrow(`result is ${checked} (needs text)`);
    await expect(refused).rejects.toThrow('error is character varying(8) (needs text)');
  });
});

// 33f5b04: the worker warns once per definition when a job arrives without its enqueue lock. Jobs of the guarded
// queue that legitimately carry none at a later delivery must not trigger it.
describe('unlocked arrivals: retried and slot-set jobs added through the guarded queue', () => {
  const { start } = useApps('s35d-unlocked');

  it.each([
    ['until_executing', {}],
    ['until_and_while_executing', {}],
    ['until_executed', { lockLimit: 2 }], // slot set (general path)
    ['until_executing', { uniqueAcross: ['queues'] as const }], // slot set across queues
  ] as const)(
    '%s %j: a job retried after its first attempt failed is not warned of',
    async (lock, extra) => {
      const { logger, lines } = captureLogger();
      const app = await start({
        unique: { lock, jobName: 'sync', ...extra },
        module: { logger },
        handler: async (job: Job) => {
          if (job.attemptsMade === 0) throw new Error('fails once');
          return 'done';
        },
      });
      const job = await app.queue.add('sync', { id: randomUUID() }, { attempts: 2 });
      await expect(app.finished(job.id!)).resolves.toBe('done');
      expect(lines.warn.filter((line) => line.includes('without the enqueue lock'))).toEqual([]);
    },
    30_000,
  );
});

// 51b7aee accepts a bounded varchar where what the store writes always fits (scope, key, state). owner and fingerprint
// have a bounded length too (a UUID or a 48-character resume token; 'v1:' and a 43-character hash): a table of the
// application's own with `owner varchar(64)` worked, and failed the bootstrap after the upgrade.
describe('PostgreSQL column-type check: bounded owner and fingerprint columns', () => {
  const pool = pgPool(1);
  const tables: string[] = [];
  afterAll(async () => {
    for (const table of tables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });
  const tableWith = async (owner: string, fingerprint: string) => {
    const table = uniqueTable('idem_s35_bounded');
    tables.push(table);
    const ddl = PostgresIdempotencyStore.migrationSql(table)
      .replace('owner text,', `owner ${owner},`)
      .replace('fingerprint text,', `fingerprint ${fingerprint},`);
    await pool.query(ddl);
    return new PostgresIdempotencyStore({ pool, table });
  };

  it('accepts varchar(64), where every owner and fingerprint fits (a resume token handed over and resumed)', async () => {
    const store = await tableWith('varchar(64)', 'varchar(64)');
    await expect(store.verify()).resolves.toBeUndefined(); // refused before the fix: "owner is character varying(64)"
    const resumeOwner = resumeOwnerOf(`bull:q:${randomUUID()}`, Date.now());
    expect(resumeOwner).toHaveLength(48);
    const fingerprint = `v1:${'x'.repeat(43)}`;
    const job = { jobId: '1', jobKey: 'bull:q:1', jobCreatedAt: 1, resumeOwner };
    const first = { scope: 's', key: 'k', owner: randomUUID(), leaseMs: 60_000, fingerprint, ...job };
    await expect(store.claim(first)).resolves.toEqual({ claimed: true, takeover: false });
    await expect(store.handOver(first, { owner: resumeOwner, leaseMs: 60_000 })).resolves.toBe(true);
    await expect(store.claim({ ...first, owner: randomUUID() })).resolves.toMatchObject({ resumed: true });
  });

  it('refuses one shorter than what the store writes', async () => {
    const store = await tableWith('varchar(47)', 'varchar(45)');
    await expect(store.verify()).rejects.toThrow(
      'owner is character varying(47) (needs text), fingerprint is character varying(45) (needs text)',
    );
  });
});

// b5aaafd: a column of the application's own that is NOT NULL with no default fails the bootstrap. One a BEFORE INSERT
// trigger fills (a tenant id from a setting, an audit column) never reaches the insert NULL: the store works on it, and
// the check now passes it.
describe('PostgreSQL column check: an own NOT NULL column that a BEFORE INSERT trigger fills', () => {
  const pool = pgPool(1);
  const table = uniqueTable('idem_s35_trigger');
  const fill = uniqueTable('s35_fill');
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.query(`DROP FUNCTION IF EXISTS ${fill}()`);
    await pool.end();
  });

  it('passes the bootstrap check, and every claim works', async () => {
    await pool.query(PostgresIdempotencyStore.migrationSql(table));
    await pool.query(`ALTER TABLE ${table} ADD COLUMN tenant text NOT NULL`);
    await pool.query(
      `CREATE FUNCTION ${fill}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.tenant := 'acme'; RETURN NEW; END $$`,
    );
    await pool.query(`CREATE TRIGGER ${fill} BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${fill}()`);
    const store = new PostgresIdempotencyStore({ pool, table });
    // The check sees the trigger (it used to refuse the table: a false rejection).
    await expect(store.verify()).resolves.toBeUndefined();
    const claim = { scope: 's', key: 'k', owner: randomUUID(), leaseMs: 60_000, fingerprint: 'f', jobId: '1' };
    await expect(store.claim(claim)).resolves.toEqual({ claimed: true, takeover: false });
    await expect(store.complete(claim, { result: '"x"', ttlMs: 60_000 })).resolves.toBe(true);
  });
});
