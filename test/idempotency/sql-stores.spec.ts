// What the SQL idempotency stores do beyond the shared store contract (`nestjs-unique-jobs/store-contract`, lib/ops/store-contract): their
// migrations, table-name validation, the database clock, and transactional mode (rollback on a lost claim or a throwing
// handler; SQLite's in-process serialization of transactions).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { IdempotencyLeaseLostError } from '../../lib/errors/idempotency-lease-lost.error.js';
import type { IdempotencyClaim, IdempotencyStore } from '../../lib/idempotency/idempotency-store.interface.js';
import {
  PostgresIdempotencyStore,
  type PgClientLike,
  type PgPoolLike,
} from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import {
  SqliteIdempotencyStore,
  type SqliteDatabaseLike,
} from '../../lib/idempotency/stores/sqlite-idempotency.store.js';
import { deferred } from '../support/deferred.js';
import { databaseUrl, pgPool, uniqueTable } from '../support/postgres.js';
import { waitFor } from '../support/wait.js';

const INVALID_TABLE_NAMES = ['', '1table', 'a.b.c', 'jobs; DROP TABLE x', 'a"b', 'with space', 'dash-name', '.table'];

function claimRequest(key: string, over: Partial<IdempotencyClaim> = {}): IdempotencyClaim {
  return {
    scope: 'payments',
    key,
    owner: randomUUID(),
    leaseMs: 30_000,
    fingerprint: 'fp',
    jobId: '1',
    ...over,
  };
}

/** Claims `key` for `first`, lets that lease run out (polling the store), and has `second` take it over. */
async function takeOver<T>(store: IdempotencyStore<T>, key: string, first: string, second: string): Promise<void> {
  expect(await store.claim(claimRequest(key, { owner: first, leaseMs: 50 }))).toEqual({
    claimed: true,
    takeover: false,
  });
  await waitFor('the 50 ms lease to run out', async () => (await store.get('payments', key)) === undefined);
  expect(await store.claim(claimRequest(key, { owner: second }))).toEqual({ claimed: true, takeover: true });
}

/**
 * `prune` deletes settled records past their retention and claims that ended more than ten minutes ago, and nothing
 * else. `age(key, ms)` moves a record's end `ms` into the past, in the store's own clock.
 */
async function expectPruning(
  store: IdempotencyStore,
  age: (key: string, agoMs: number) => Promise<void>,
  rows: () => Promise<number>,
): Promise<void> {
  const keys = ['settled-old', 'settled-live', 'claim-recent', 'claim-abandoned', 'claim-live'];
  const owners = new Map(keys.map((key) => [key, randomUUID()]));
  for (const key of keys) {
    expect(await store.claim(claimRequest(key, { scope: 'prune', owner: owners.get(key) }))).toMatchObject({
      claimed: true,
    });
  }
  for (const key of ['settled-old', 'settled-live']) {
    await store.complete({ scope: 'prune', key, owner: owners.get(key)! }, { result: '1', ttlMs: 60_000 });
  }
  await age('settled-old', 1000);
  await age('claim-recent', 60_000);
  await age('claim-abandoned', 11 * 60_000);

  expect(await store.prune!(100)).toBe(2);
  expect(await rows()).toBe(3);
  expect(await store.prune!(100)).toBe(0);
  expect((await store.get('prune', 'settled-live'))?.state).toBe('completed');
  expect((await store.get('prune', 'claim-live'))?.state).toBe('in_progress');
}

/** Resolves after the event loop has run everything already queued (no timer involved). */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('PostgresIdempotencyStore', () => {
  const pool = pgPool(6);
  const tables: string[] = [];
  const schema = uniqueTable('schema');
  let store: PostgresIdempotencyStore;
  let handlerTable: string;

  function newTable(label: string): string {
    const table = uniqueTable(label);
    tables.push(table);
    return table;
  }

  async function handlerRows(): Promise<string[]> {
    const { rows } = await pool.query<{ note: string }>(`SELECT note FROM ${handlerTable} ORDER BY note`);
    return rows.map((row) => row.note);
  }

  beforeAll(async () => {
    store = new PostgresIdempotencyStore({ pool, table: newTable('pg_store') });
    await store.migrate();
    handlerTable = newTable('pg_handler');
    await pool.query(`CREATE TABLE ${handlerTable} (note text PRIMARY KEY)`);
  });

  afterAll(async () => {
    for (const table of tables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
  });

  it('prunes settled records past retention and claims abandoned for ten minutes, in batches', async () => {
    const table = newTable('pg_prune');
    const pruned = new PostgresIdempotencyStore({ pool, table });
    await pruned.migrate();
    await expectPruning(
      pruned,
      async (key, agoMs) => {
        await pool.query(
          `UPDATE ${table} SET expires_at = clock_timestamp() - $2 * interval '1 millisecond' WHERE scope = 'prune' AND key = $1`,
          [key, agoMs],
        );
      },
      async () => Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0].n),
    );
  });

  it('accepts a real pg.Pool and hands work a pg.PoolClient', async () => {
    const realPool = new pg.Pool({ connectionString: databaseUrl() });
    const typed: PgPoolLike = realPool;
    const client: PgClientLike = await realPool.connect();
    client.release();
    expect(new PostgresIdempotencyStore({ pool: typed }).name).toBe('postgres');
    await realPool.end();
  });

  it('migrates twice and from several stores at once without error, and the table works', async () => {
    const table = newTable('pg_migrate');
    const stores = [1, 2, 3, 4].map(() => new PostgresIdempotencyStore({ pool, table }));
    await Promise.all(stores.map((each) => each.migrate()));
    await stores[0].migrate();
    const { rows } = await pool.query<{ indexdef: string }>('SELECT indexdef FROM pg_indexes WHERE tablename = $1', [
      table,
    ]);
    expect(rows.map((row) => row.indexdef).some((def) => def.includes('(expires_at)'))).toBe(true);
    expect(await stores[1].claim(claimRequest('k'))).toEqual({ claimed: true, takeover: false });
    expect((await stores[2].get('payments', 'k'))?.state).toBe('in_progress');
  });

  it('migrates a schema-qualified table', async () => {
    await pool.query(`CREATE SCHEMA ${schema}`);
    const qualified = new PostgresIdempotencyStore({ pool, table: `${schema}.records` });
    await qualified.migrate();
    await qualified.migrate();
    expect(await qualified.claim(claimRequest('k'))).toEqual({ claimed: true, takeover: false });
    const { rows } = await pool.query(`SELECT key FROM ${schema}.records`);
    expect(rows).toEqual([{ key: 'k' }]);
  });

  it('rejects invalid table names before building any SQL', () => {
    for (const table of INVALID_TABLE_NAMES) {
      expect(() => new PostgresIdempotencyStore({ pool, table })).toThrow(/invalid table name/);
      expect(() => PostgresIdempotencyStore.migrationSql(table)).toThrow(/invalid table name/);
    }
    expect(PostgresIdempotencyStore.migrationSql('app.idem')).toContain('CREATE TABLE IF NOT EXISTS "app"."idem"');
  });

  it('stamps records with the database clock, as millisecond numbers', async () => {
    const dbNow = async () =>
      Number(
        (await pool.query<{ now: number }>('SELECT extract(epoch from clock_timestamp())::float8 * 1000 AS now'))
          .rows[0].now,
      );
    const before = await dbNow();
    await store.claim(claimRequest('clock', { leaseMs: 60_000 }));
    const after = await dbNow();
    const record = (await store.get('payments', 'clock'))!;
    expect(typeof record.createdAt).toBe('number');
    expect(record.createdAt).toBeGreaterThanOrEqual(Math.floor(before));
    expect(record.createdAt).toBeLessThanOrEqual(after);
    expect(record.expiresAt - record.createdAt).toBeGreaterThanOrEqual(59_999);
    expect(record.expiresAt - record.createdAt).toBeLessThanOrEqual(60_001);
    const stopped = await store.claim(claimRequest('clock'));
    expect(stopped.claimed).toBe(false);
    if (!stopped.claimed) {
      expect(stopped.expiresInMs).toBeGreaterThan(0);
      expect(stopped.expiresInMs).toBeLessThanOrEqual(60_000);
    }
  });

  it('commits the handler writes and the completed record together', async () => {
    const owner = randomUUID();
    await store.claim(claimRequest('tx-ok', { owner }));
    const value = await store.runInTransaction(
      { scope: 'payments', key: 'tx-ok', owner },
      async (client) => {
        await client.query(`INSERT INTO ${handlerTable} (note) VALUES ($1)`, ['tx-ok']);
        return { paid: 42 };
      },
      (result) => ({ result: JSON.stringify(result), ttlMs: 60_000 }),
    );
    expect(value).toEqual({ paid: 42 });
    expect(await handlerRows()).toContain('tx-ok');
    expect(await store.get('payments', 'tx-ok')).toMatchObject({ state: 'completed', result: '{"paid":42}', owner });
  });

  it('holds the record for the whole transaction: a claimant after the lease ran out gives up on the row lock within a moment and sees it in progress', async () => {
    const first = randomUUID();
    await store.claim(claimRequest('tx-held', { owner: first, leaseMs: 50 }));
    const value = await store.runInTransaction(
      { scope: 'payments', key: 'tx-held', owner: first },
      async (client) => {
        await client.query(`INSERT INTO ${handlerTable} (note) VALUES ($1)`, ['tx-held']);
        await waitFor('the lease to run out', async () => (await store.get('payments', 'tx-held')) === undefined);
        // Not taken over, and not waited for: the claim's lock_timeout (200 ms) ends its wait on the row lock.
        const started = Date.now();
        const contender = await store.claim(claimRequest('tx-held', { owner: randomUUID(), leaseMs: 30_000 }));
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(contender).toMatchObject({
          claimed: false,
          record: { state: 'in_progress', owner: first },
          expiresInMs: 1_000, // its lease ended under the live lock: looked at again within a second
        });
        return 'done';
      },
      (result) => ({ result: JSON.stringify(result), ttlMs: 60_000 }),
    );
    expect(value).toBe('done');
    expect(await store.claim(claimRequest('tx-held'))).toMatchObject({
      claimed: false,
      record: { state: 'completed', owner: first, result: '"done"' },
    });
    expect(await handlerRows()).toContain('tx-held');
  });

  it('a pool whose statement_timeout is shorter than the claim lock_timeout: a contender on a held row still sees it in progress (57014 taken as busy, like 55P03)', async () => {
    const impatient = new pg.Pool({ connectionString: databaseUrl(), max: 2, statement_timeout: 50 });
    try {
      const contenderStore = new PostgresIdempotencyStore({ pool: impatient, table: store.table });
      const first = randomUUID();
      await store.claim(claimRequest('tx-impatient', { owner: first, leaseMs: 50 }));
      await store.runInTransaction(
        { scope: 'payments', key: 'tx-impatient', owner: first },
        async () => {
          await waitFor(
            'the lease to run out',
            async () => (await store.get('payments', 'tx-impatient')) === undefined,
          );
          const contender = await contenderStore.claim(claimRequest('tx-impatient', { owner: randomUUID() }));
          expect(contender).toMatchObject({ claimed: false, record: { state: 'in_progress', owner: first } });
          return 'done';
        },
        (result) => ({ result: JSON.stringify(result), ttlMs: 60_000 }),
      );
      expect(await store.get('payments', 'tx-impatient')).toMatchObject({ state: 'completed', owner: first });
    } finally {
      await impatient.end();
    }
  });

  it('a claim cancelled by statement_timeout with no row lock held (the table locked against writes) fails with that error: not taken as busy, so the delivery is not delayed behind a lock nobody holds', async () => {
    const impatient = new pg.Pool({ connectionString: databaseUrl(), max: 2, statement_timeout: 50 });
    const blocker = await pool.connect();
    try {
      const contenderStore = new PostgresIdempotencyStore({ pool: impatient, table: store.table });
      await store.claim(claimRequest('tx-slow', { leaseMs: 50 }));
      await waitFor('the lease to run out', async () => (await store.get('payments', 'tx-slow')) === undefined);
      // EXCLUSIVE blocks writes and FOR UPDATE, not plain reads: the ended claim is still readable as in progress.
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE ${store.table} IN EXCLUSIVE MODE`);
      await expect(contenderStore.claim(claimRequest('tx-slow'))).rejects.toMatchObject({ code: '57014' });
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
      await impatient.end();
    }
    // Once the table is free, the ended claim is taken over as usual.
    expect(await store.claim(claimRequest('tx-slow'))).toMatchObject({ claimed: true, takeover: true });
  });

  it('runs transactional work at the isolation level it was given; a contender meanwhile sees it in progress, then reads the result', async () => {
    const strict = new PostgresIdempotencyStore({ pool, table: newTable('idem_rr'), isolation: 'repeatable read' });
    await strict.migrate();
    const owner = randomUUID();
    await strict.claim(claimRequest('rr', { owner, leaseMs: 50 }));
    const value = await strict.runInTransaction(
      { scope: 'payments', key: 'rr', owner },
      async (client) => {
        const { rows } = await client.query('SHOW transaction_isolation');
        expect(rows).toEqual([{ transaction_isolation: 'repeatable read' }]);
        await waitFor('the lease to run out', async () => (await strict.get('payments', 'rr')) === undefined);
        expect(await strict.claim(claimRequest('rr'))).toMatchObject({
          claimed: false,
          record: { state: 'in_progress', owner },
        });
        return 'ok';
      },
      (result) => ({ result: JSON.stringify(result), ttlMs: 60_000 }),
    );
    expect(value).toBe('ok');
    expect(await strict.claim(claimRequest('rr'))).toMatchObject({
      claimed: false,
      record: { state: 'completed', result: '"ok"' },
    });
    expect(() => new PostgresIdempotencyStore({ pool, isolation: 'chaos' as 'serializable' })).toThrow(/isolation/);
  });

  it('rolls back on a claim lost before the transaction started too', async () => {
    const first = randomUUID();
    await takeOver(store, 'tx-lost-before', first, randomUUID());
    const attempt = store.runInTransaction(
      { scope: 'payments', key: 'tx-lost-before', owner: first },
      async (client) => {
        await client.query(`INSERT INTO ${handlerTable} (note) VALUES ($1)`, ['tx-lost-before']);
      },
      () => ({ result: undefined, ttlMs: 60_000 }),
    );
    await expect(attempt).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
    expect(await handlerRows()).not.toContain('tx-lost-before');
  });

  it('rolls back when work or completion throws, leaves the claim in progress and returns the connections', async () => {
    const owner = randomUUID();
    await store.claim(claimRequest('tx-throw', { owner }));
    const ref = { scope: 'payments', key: 'tx-throw', owner };
    for (let i = 0; i < 8; i++) {
      await expect(
        store.runInTransaction(
          ref,
          async (client) => {
            await client.query(`INSERT INTO ${handlerTable} (note) VALUES ($1)`, [`tx-throw-${i}`]);
            throw new Error(`boom ${i}`);
          },
          () => ({ result: undefined, ttlMs: 60_000 }),
        ),
      ).rejects.toThrow(`boom ${i}`);
    }
    await expect(
      store.runInTransaction(
        ref,
        async (client) => {
          await client.query(`INSERT INTO ${handlerTable} (note) VALUES ($1)`, ['tx-throw-completion']);
          return 1n;
        },
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      ),
    ).rejects.toThrow(TypeError);
    expect((await handlerRows()).filter((note) => note.startsWith('tx-throw'))).toEqual([]);
    expect(await store.get('payments', 'tx-throw')).toMatchObject({ state: 'in_progress', owner });
    // Nine failed transactions on a pool of six: every client went back to the pool, none is stuck in a transaction.
    expect(pool.waitingCount).toBe(0);
    expect(pool.idleCount).toBe(pool.totalCount);
    expect(await store.complete(ref, { result: '"late"', ttlMs: 60_000 })).toBe(true);
  });
});

describe('SqliteIdempotencyStore', () => {
  const dir = mkdtempSync(join(tmpdir(), 'unique-jobs-sqlite-'));
  const file = join(dir, 'store.db');
  let database: Database.Database;
  /** A second connection to the same file: sees only what the first one committed. */
  let reader: Database.Database;
  let store: SqliteIdempotencyStore;

  beforeAll(async () => {
    database = new Database(file, { timeout: 10_000 });
    database.pragma('journal_mode = WAL');
    database.exec('CREATE TABLE handler_writes (note TEXT PRIMARY KEY)');
    reader = new Database(file, { readonly: true });
    store = new SqliteIdempotencyStore({ database });
    await store.migrate();
  });

  afterAll(() => {
    database.close();
    reader.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const committedNotes = (): string[] =>
    (reader.prepare('SELECT note FROM handler_writes ORDER BY note').all() as { note: string }[]).map((r) => r.note);
  const committedRecord = (key: string) =>
    reader.prepare('SELECT state, owner FROM unique_jobs_idempotency WHERE key = ?').get(key) as
      { state: string; owner: string } | undefined;

  it('prunes settled records past retention and claims abandoned for ten minutes, in batches', async () => {
    const pruning = new Database(join(dir, 'prune.db'));
    const pruned = new SqliteIdempotencyStore({ database: pruning });
    await pruned.migrate();
    try {
      await expectPruning(
        pruned,
        async (key, agoMs) => {
          pruning
            .prepare(`UPDATE unique_jobs_idempotency SET expires_at = ? WHERE scope = 'prune' AND key = ?`)
            .run(Date.now() - agoMs, key);
        },
        async () => (pruning.prepare('SELECT count(*) AS n FROM unique_jobs_idempotency').get() as { n: number }).n,
      );
    } finally {
      pruning.close();
    }
  });

  it('accepts a real better-sqlite3 Database', () => {
    const memory = new Database(':memory:');
    const typed: SqliteDatabaseLike = memory;
    expect(new SqliteIdempotencyStore({ database: typed }).name).toBe('sqlite');
    memory.close();
  });

  it('migrates twice and from two connections without error, and the table works', async () => {
    const other = new Database(file, { timeout: 10_000 });
    const table = uniqueTable('sqlite_migrate');
    const stores = [
      new SqliteIdempotencyStore({ database, table }),
      new SqliteIdempotencyStore({ database: other, table }),
    ];
    await Promise.all(stores.map((each) => each.migrate()));
    await stores[0].migrate();
    expect(await stores[0].claim(claimRequest('k'))).toEqual({ claimed: true, takeover: false });
    expect((await stores[1].get('payments', 'k'))?.state).toBe('in_progress');
    const indexes = database.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`).all(table);
    expect(indexes).toContainEqual({ name: `${table}_expires_at_idx` });
    database.exec(`DROP TABLE ${table}`);
    other.close();
  });

  it('migrates a table qualified with the schema name', async () => {
    const qualified = new SqliteIdempotencyStore({ database, table: 'main.qualified_records' });
    await qualified.migrate();
    await qualified.migrate();
    expect(await qualified.claim(claimRequest('k'))).toEqual({ claimed: true, takeover: false });
    database.exec('DROP TABLE main.qualified_records');
  });

  it('rejects invalid table names before building any SQL', () => {
    for (const table of INVALID_TABLE_NAMES) {
      expect(() => new SqliteIdempotencyStore({ database, table })).toThrow(/invalid table name/);
      expect(() => SqliteIdempotencyStore.migrationSql(table)).toThrow(/invalid table name/);
    }
  });

  it('runs concurrent transactions one after the other: the second starts after the first committed', async () => {
    const owners = [randomUUID(), randomUUID()];
    await store.claim(claimRequest('serial-a', { owner: owners[0] }));
    await store.claim(claimRequest('serial-b', { owner: owners[1] }));
    const log: string[] = [];
    const gate = deferred();
    const first = store.runInTransaction(
      { scope: 'payments', key: 'serial-a', owner: owners[0] },
      async (db) => {
        log.push('a:start');
        db.prepare('INSERT INTO handler_writes (note) VALUES (?)').run('serial-a');
        await gate.promise;
        log.push('a:end');
        return 'a';
      },
      (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
    );
    const second = store.runInTransaction(
      { scope: 'payments', key: 'serial-b', owner: owners[1] },
      async (db) => {
        log.push('b:start');
        // What another connection sees is what was committed: the first transaction, whole.
        log.push(`b:sees:${committedNotes().join(',')}:${committedRecord('serial-a')?.state}`);
        db.prepare('INSERT INTO handler_writes (note) VALUES (?)').run('serial-b');
        return 'b';
      },
      (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
    );
    await waitFor('the first transaction to start', () => log.includes('a:start'));
    await turn();
    expect(log).toEqual(['a:start']);
    expect(committedNotes()).not.toContain('serial-a');
    gate.resolve();
    await expect(Promise.all([first, second])).resolves.toEqual(['a', 'b']);
    expect(log).toEqual(['a:start', 'a:end', 'b:start', 'b:sees:serial-a:completed']);
    expect(committedNotes()).toEqual(expect.arrayContaining(['serial-a', 'serial-b']));
    expect(committedRecord('serial-b')?.state).toBe('completed');
  });

  it('makes a claim issued during a transaction wait, and keeps it when that transaction rolls back', async () => {
    const owner = randomUUID();
    await store.claim(claimRequest('rollback-tx', { owner }));
    const gate = deferred();
    let started = false;
    const transaction = store.runInTransaction(
      { scope: 'payments', key: 'rollback-tx', owner },
      async (db) => {
        started = true;
        db.prepare('INSERT INTO handler_writes (note) VALUES (?)').run('rollback-tx');
        await gate.promise;
        throw new Error('handler failed');
      },
      () => ({ result: undefined, ttlMs: 60_000 }),
    );
    await waitFor('the transaction to start', () => started);
    let claimSettled = false;
    const otherOwner = randomUUID();
    const claim = store.claim(claimRequest('during-tx', { owner: otherOwner })).finally(() => {
      claimSettled = true;
    });
    await turn();
    expect(claimSettled).toBe(false);
    expect(committedRecord('during-tx')).toBeUndefined();
    gate.resolve();
    await expect(transaction).rejects.toThrow('handler failed');
    expect(await claim).toEqual({ claimed: true, takeover: false });
    expect(database.inTransaction).toBe(false);
    expect(committedRecord('during-tx')).toEqual({ state: 'in_progress', owner: otherOwner });
    expect(committedNotes()).not.toContain('rollback-tx');
    expect(committedRecord('rollback-tx')).toEqual({ state: 'in_progress', owner });
  });

  it('rolls back when work throws synchronously or completion throws, and the store stays usable', async () => {
    const owner = randomUUID();
    await store.claim(claimRequest('throwing', { owner }));
    const ref = { scope: 'payments', key: 'throwing', owner };
    await expect(
      store.runInTransaction(
        ref,
        (db) => {
          db.prepare('INSERT INTO handler_writes (note) VALUES (?)').run('throwing-work');
          throw new Error('sync throw');
        },
        () => ({ result: undefined, ttlMs: 60_000 }),
      ),
    ).rejects.toThrow('sync throw');
    await expect(
      store.runInTransaction(
        ref,
        async (db) => {
          db.prepare('INSERT INTO handler_writes (note) VALUES (?)').run('throwing-completion');
          return 1n;
        },
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      ),
    ).rejects.toThrow(TypeError);
    expect(database.inTransaction).toBe(false);
    expect(committedNotes().filter((note) => note.startsWith('throwing'))).toEqual([]);
    expect(await store.complete(ref, { result: '"late"', ttlMs: 60_000 })).toBe(true);
    expect(committedRecord('throwing')).toEqual({ state: 'completed', owner });
  });

  it('rolls the handler writes back when the claim was taken over', async () => {
    const first = randomUUID();
    const second = randomUUID();
    await takeOver(store, 'lost', first, second);
    const attempt = store.runInTransaction(
      { scope: 'payments', key: 'lost', owner: first },
      async (db) => {
        db.prepare('INSERT INTO handler_writes (note) VALUES (?)').run('lost');
        return 'done';
      },
      (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
    );
    await expect(attempt).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
    expect(committedNotes()).not.toContain('lost');
    expect(committedRecord('lost')).toEqual({ state: 'in_progress', owner: second });
    expect(await store.get('payments', 'lost')).toMatchObject({ attempts: 2, owner: second });
  });
});
