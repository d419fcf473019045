// A transactional handler that ends the claim's transaction itself (COMMIT or ROLLBACK through the handle it got, or
// TypeORM's queryRunner.commitTransaction()/rollbackTransaction()): the store completes the record only inside the
// transaction that locked it, so no `completed` record is ever written without the effect. The job fails for good with
// IdempotencyTransactionEndedError; after a COMMIT the key is kept as failed (the writes up to then are committed: no
// later delivery runs the handler again), after a ROLLBACK the claim is released. Real PostgreSQL and SQLite, through
// the module and BullMQ.
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type pg from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  idempotencyOf,
  IdempotencyTransactionEndedError,
  PostgresIdempotencyStore,
  SqliteIdempotencyStore,
  TransactionHostIdempotencyStore,
  TypeOrmIdempotencyStore,
  type IdempotencyJob,
  type SqlIdempotencyStore,
} from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { databaseUrl, pgPool, uniqueTable } from '../support/postgres.js';
import { waitFor } from '../support/wait.js';
import { FakeTransactionHost } from './fake-transaction-host.js';

/** How the handler ends the transaction: a raw statement, or TypeORM's runner API. */
type Ending =
  'COMMIT' | 'COMMIT; BEGIN' | 'nested COMMIT' | 'ROLLBACK' | 'ROLLBACK; BEGIN' | 'runner.commit' | 'runner.rollback';

interface Data {
  key: string;
  end?: Ending;
  /** After writing (and ending, when asked): run a statement the database refuses. */
  failStatement?: boolean;
  /** Then throw. */
  throwAfter?: boolean;
  /** Run a statement the database refuses and catch its error, then return as if nothing happened. */
  swallowFailure?: boolean;
  /** Return at once, leaving a slow statement and then one the database refuses in flight (not awaited). */
  failLate?: boolean;
}

/** One database and store: how the handler writes its effect and ends the transaction, how the test counts effects. */
interface Setup {
  store: SqlIdempotencyStore<unknown>;
  /** Writes an effect row through the transaction handle, then ends the transaction as asked. */
  write(handle: unknown, key: string, end: Ending | undefined): Promise<void>;
  /** Runs a statement the database refuses through the transaction handle (PostgreSQL then aborts the transaction). */
  fail(handle: unknown): Promise<void>;
  /** Runs a statement that takes a while (50 ms) through the transaction handle. */
  pause(handle: unknown): Promise<void>;
  /** Committed effect rows of a key (read on another connection). */
  effects(key: string): Promise<number>;
  close(): Promise<void>;
}

const REFUSED = 'SELECT * FROM no_such_table_here';
const PAUSE = 'SELECT pg_sleep(0.05)';

const directory = mkdtempSync(join(tmpdir(), 'idem-tx-ended-'));
let pool: pg.Pool;
const tables: string[] = [];

function pgSetup(kind: 'pg' | 'typeorm'): () => Promise<Setup> {
  return async () => {
    const idem = uniqueTable(`idem_ended_${kind}`);
    const effects = uniqueTable(`fx_ended_${kind}`);
    tables.push(idem, effects);
    await pool.query(`CREATE TABLE ${effects} (id serial PRIMARY KEY, key text NOT NULL)`);
    const insert = `INSERT INTO ${effects} (key) VALUES ($1)`;
    const count = async (key: string) =>
      Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${effects} WHERE key = $1`, [key])).rows[0].n);
    if (kind === 'pg') {
      const store = new PostgresIdempotencyStore({ pool, table: idem });
      await store.migrate();
      return {
        store,
        write: async (handle, key, end) => {
          const client = handle as pg.PoolClient;
          await client.query(insert, [key]);
          if (end) await client.query(end);
          // Another write in the transaction the handler began: the store must not commit it (it ends that
          // transaction with a rollback once it sees its own is gone), or a retry would write it again.
          if (end?.endsWith('BEGIN')) await client.query(insert, [key]);
        },
        fail: async (handle) => void (await (handle as pg.PoolClient).query(REFUSED)),
        pause: async (handle) => void (await (handle as pg.PoolClient).query(PAUSE)),
        effects: count,
        close: async () => undefined,
      };
    }
    const dataSource = new DataSource({ type: 'postgres', url: databaseUrl(), poolSize: 3, logging: false });
    await dataSource.initialize();
    const store = new TypeOrmIdempotencyStore({ dataSource, table: idem });
    await store.migrate();
    return {
      store,
      write: (handle, key, end) => typeOrmWrite(handle as EntityManager, insert, key, end),
      fail: async (handle) => void (await (handle as EntityManager).query(REFUSED)),
      pause: async (handle) => void (await (handle as EntityManager).query(PAUSE)),
      effects: count,
      close: () => dataSource.destroy(),
    };
  };
}

async function typeOrmWrite(manager: EntityManager, insert: string, key: string, end: Ending | undefined) {
  await manager.query(insert, [key]);
  // A raw COMMIT inside a nested manager.transaction() (a savepoint of TypeORM's): TypeORM's own release then fails.
  if (end === 'nested COMMIT') await manager.transaction((inner) => inner.query('COMMIT'));
  else if (end === 'runner.commit') await manager.queryRunner!.commitTransaction();
  else if (end === 'runner.rollback') await manager.queryRunner!.rollbackTransaction();
  else if (end) await manager.query(end);
}

function sqliteSetup(kind: 'sqlite' | 'typeorm-sqlite' | 'cls-typeorm-sqlite'): () => Promise<Setup> {
  return async () => {
    const file = join(directory, `${kind}.db`);
    const reader = new Database(file, { timeout: 10_000 });
    reader.pragma('journal_mode = WAL');
    reader.exec('CREATE TABLE effects (id INTEGER PRIMARY KEY, key TEXT NOT NULL)');
    const insert = 'INSERT INTO effects (key) VALUES (?)';
    const count = async (key: string) =>
      Number((reader.prepare('SELECT count(*) AS n FROM effects WHERE key = ?').get(key) as { n: number }).n);
    if (kind === 'sqlite') {
      const database = new Database(file, { timeout: 10_000 });
      const store = new SqliteIdempotencyStore({ database });
      await store.migrate();
      return {
        store,
        write: async (handle, key, end) => {
          const db = handle as Database.Database;
          db.prepare(insert).run(key);
          if (end) db.exec(end);
        },
        fail: async (handle) => void (handle as Database.Database).exec(REFUSED),
        pause: async () => undefined,
        effects: count,
        close: async () => {
          database.close();
          reader.close();
        },
      };
    }
    const dataSource = new DataSource({ type: 'better-sqlite3', database: file, enableWAL: true, logging: false });
    await dataSource.initialize();
    // @nestjs-cls/transactional's TypeORM adapter drives the transaction (the real TransactionHost runs in
    // orm-cls.spec.ts, in worker processes); the handler gets its EntityManager.
    const store =
      kind === 'typeorm-sqlite'
        ? new TypeOrmIdempotencyStore({ dataSource })
        : new TransactionHostIdempotencyStore({
            txHost: new FakeTransactionHost<EntityManager>(
              new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }).optionsFactory(dataSource),
            ),
          });
    await store.migrate();
    return {
      store,
      write: (handle, key, end) => typeOrmWrite(handle as EntityManager, insert, key, end),
      fail: async (handle) => void (await (handle as EntityManager).query(REFUSED)),
      pause: async () => undefined,
      effects: count,
      close: async () => {
        await dataSource.destroy();
        reader.close();
      },
    };
  };
}

beforeAll(() => {
  pool = pgPool(4);
});

afterAll(async () => {
  for (const table of tables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
  rmSync(directory, { recursive: true, force: true });
});

describe.each([
  ['PostgresIdempotencyStore (pg)', pgSetup('pg'), ['COMMIT', 'COMMIT; BEGIN', 'ROLLBACK', 'ROLLBACK; BEGIN']],
  [
    'TypeOrmIdempotencyStore on PostgreSQL',
    pgSetup('typeorm'),
    ['COMMIT', 'COMMIT; BEGIN', 'ROLLBACK', 'runner.commit', 'runner.rollback'],
  ],
  // A handler that commits and begins again leaves the store in a transaction of its own: SQLite has no transaction
  // id, the savepoint the store takes after its lock tells (TypeORM's better-sqlite3 runs one statement per query).
  ['SqliteIdempotencyStore (better-sqlite3)', sqliteSetup('sqlite'), ['COMMIT', 'COMMIT; BEGIN', 'ROLLBACK']],
  [
    'TypeOrmIdempotencyStore on SQLite',
    sqliteSetup('typeorm-sqlite'),
    ['COMMIT', 'nested COMMIT', 'ROLLBACK', 'runner.commit'],
  ],
  [
    'TransactionHostIdempotencyStore (TypeORM adapter) on SQLite',
    sqliteSetup('cls-typeorm-sqlite'),
    ['COMMIT', 'nested COMMIT', 'ROLLBACK', 'runner.commit'],
  ],
] as const)('%s: a handler that ends the claim transaction itself', (label, make, endings) => {
  let setup: Setup;
  const { start } = useApps('tx-ended', {
    module: {},
    worker: { concurrency: 2 },
  });

  beforeAll(async () => {
    setup = await make();
  });
  afterAll(async () => {
    await setup.close();
  });

  const boot = async () => {
    const app = await start({
      module: { idempotency: { stores: { sql: setup.store } } },
      idempotency: {
        key: (job: IdempotencyJob<Data>) => job.data.key,
        fingerprint: ['key'],
        store: 'sql',
        transactional: true,
      },
      handler: async (job: Job) => {
        const data = job.data as Data;
        const { transaction } = idempotencyOf(job);
        await setup.write(transaction, data.key, data.end);
        if (data.failStatement) await setup.fail(transaction);
        if (data.swallowFailure) await setup.fail(transaction).catch(() => undefined);
        // In flight when the handler returns: it reaches the database after the store's last statement (queued behind
        // the pause on the transaction's connection), before its COMMIT.
        if (data.failLate) {
          void setup
            .pause(transaction)
            .then(() => setup.fail(transaction))
            .catch(() => undefined);
        }
        if (data.throwAfter) throw new Error(`handler failed after ${data.end ?? 'writing'}`);
        return { wrote: data.key };
      },
    });
    return { app, events: new EventLog(app) };
  };

  const committed = endings.filter((end) =>
    ['COMMIT', 'COMMIT; BEGIN', 'nested COMMIT', 'runner.commit'].includes(end),
  );
  const committedThenBegun = endings.filter((end) => end === 'COMMIT; BEGIN');
  const rolledBack = endings.filter((end) => ['ROLLBACK', 'ROLLBACK; BEGIN', 'runner.rollback'].includes(end));

  it.each(committed)(
    '%s: IdempotencyTransactionEndedError (committed), no retry, the key kept failed, never a completed record',
    async (end) => {
      const { app, events } = await boot();
      const key = `commit-${end}`;
      const scope = `${app.queue.name}:effect`;
      const job = await app.queue.add('effect', { key, end }, { attempts: 3 });
      await expect(app.finished(job)).rejects.toThrow(
        `The handler of idempotency key "${key}" (scope "${scope}") ended the claim's transaction itself (it committed it`,
      );
      expect(app.runs).toHaveLength(1); // no retry: the error is unrecoverable
      expect((await app.queue.getJob(job.id!))?.attemptsMade).toBe(1);
      // The handler's write committed with its own COMMIT; the record says failed, not completed.
      expect(await setup.effects(key)).toBe(1);
      const record = await setup.store.get(scope, key);
      expect(record).toMatchObject({ state: 'failed', result: undefined });
      expect(JSON.parse(record!.error!)).toMatchObject({ name: 'IdempotencyTransactionEndedError' });
      expect(events.of('idempotencyFailureKept')).toHaveLength(1);
      expect(events.of('idempotencyCompleted')).toEqual([]);

      // A later delivery does not run the handler on top of the committed writes.
      const again = await app.queue.add('effect', { key });
      await expect(app.finished(again)).rejects.toThrow('IdempotencyTransactionEndedError');
      expect(app.runs).toHaveLength(1);
      expect(await setup.effects(key)).toBe(1);
    },
  );

  it.each(rolledBack)(
    '%s: IdempotencyTransactionEndedError (rolled back), the claim released, nothing written',
    async (end) => {
      const { app, events } = await boot();
      const key = `rollback-${end}`;
      const scope = `${app.queue.name}:effect`;
      const job = await app.queue.add('effect', { key, end }, { attempts: 3 });
      await expect(app.finished(job)).rejects.toThrow('(it rolled it back: nothing of it was committed)');
      expect(app.runs).toHaveLength(1);
      expect(await setup.effects(key)).toBe(0);
      expect(await setup.store.get(scope, key)).toBeUndefined();
      expect(events.of('idempotencyReleased')).toHaveLength(1);
      expect(events.of('idempotencyCompleted')).toEqual([]);

      // The key is free: a well-behaved delivery runs and completes it.
      const again = await app.queue.add('effect', { key });
      await expect(app.finished(again)).resolves.toEqual({ wrote: key });
      expect(await setup.effects(key)).toBe(1);
      expect(await setup.store.get(scope, key)).toMatchObject({
        state: 'completed',
        result: JSON.stringify({ wrote: key }),
      });
    },
  );

  it.each(committed.filter((end) => end !== 'nested COMMIT'))(
    '%s, then the handler throws: IdempotencyTransactionEndedError (committed) with its error as cause, no retry, the key kept failed',
    async (end) => {
      const { app, events } = await boot();
      const key = `commit-throw-${end}`;
      const scope = `${app.queue.name}:effect`;
      const job = await app.queue.add('effect', { key, end, throwAfter: true }, { attempts: 3 });
      await expect(app.finished(job)).rejects.toThrow(`The handler then threw: Error: handler failed after ${end}`);
      // Retrying would write again on top of the committed write: the job fails for good, the key stays failed.
      expect(app.runs).toHaveLength(1);
      expect(await setup.effects(key)).toBe(1);
      expect(await setup.store.get(scope, key)).toMatchObject({ state: 'failed' });
      expect(events.of('idempotencyFailureKept')).toHaveLength(1);
      expect(events.of('idempotencyReleased')).toEqual([]);
      const again = await app.queue.add('effect', { key });
      await expect(app.finished(again)).rejects.toThrow('IdempotencyTransactionEndedError');
      expect(app.runs).toHaveLength(1);
      expect(await setup.effects(key)).toBe(1);
    },
  );

  if (committedThenBegun.length > 0)
    it.each(committedThenBegun)(
      '%s, then a statement the database refuses (PostgreSQL aborts the transaction the handler began): committed, kept failed, no retry',
      async (end) => {
        const { app, events } = await boot();
        const key = `commit-begin-refused`;
        const scope = `${app.queue.name}:effect`;
        const job = await app.queue.add('effect', { key, end, failStatement: true }, { attempts: 3 });
        await expect(app.finished(job)).rejects.toThrow("ended the claim's transaction itself (it committed it");
        expect(app.runs).toHaveLength(1);
        expect(await setup.effects(key)).toBe(1);
        expect(await setup.store.get(scope, key)).toMatchObject({ state: 'failed' });
        expect(events.of('idempotencyFailureKept')).toHaveLength(1);
      },
    );

  it('a statement the database refuses, left to throw: its own error, the transaction rolled back, retried, the claim released', async () => {
    const { app, events } = await boot();
    const key = 'refused-statement';
    const scope = `${app.queue.name}:effect`;
    const job = await app.queue.add('effect', { key, failStatement: true }, { attempts: 2 });
    await expect(app.finished(job)).rejects.toThrow('no_such_table_here');
    expect(app.runs).toHaveLength(2);
    expect(await setup.effects(key)).toBe(0);
    expect(await setup.store.get(scope, key)).toBeUndefined();
    expect(events.of('idempotencyReleased')).toHaveLength(2);
    expect(events.of('idempotencyFailureKept')).toEqual([]);

    // The store (and, on SQLite, TypeORM's one shared runner) is in a sound state: a clean delivery completes.
    const again = await app.queue.add('effect', { key });
    await expect(app.finished(again)).resolves.toEqual({ wrote: key });
    expect(await setup.effects(key)).toBe(1);
  });

  // PostgreSQL aborts the transaction at the refused statement and answers the COMMIT with a ROLLBACK, no error: the
  // attempt must not complete with its writes (and its claim) gone. SQLite keeps the transaction: the write commits.
  // Refused after the store's last statement (not awaited by the handler), only COMMIT's answer tells: the pg store
  // reads it; an ORM commits without showing it, so the store asks the database whether the transaction committed.
  it.each([
    ['its error caught by the handler', { swallowFailure: true }],
    ['not awaited, refused after the store’s last one', { failLate: true }],
  ] as const)('a statement the database refuses, %s: never completed without its effect', async (_case, how) => {
    const { app, events } = await boot();
    const key = Object.keys(how)[0];
    const scope = `${app.queue.name}:effect`;
    const job = await app.queue.add('effect', { key, ...how }, { attempts: 2 });
    if (label.includes('PostgreSQL') || label.includes('(pg)')) {
      await expect(app.finished(job)).rejects.toThrow(
        'failLate' in how ? 'PostgreSQL rolled the transaction back at COMMIT' : 'current transaction is aborted',
      );
      expect(app.runs).toHaveLength(2);
      expect(await setup.effects(key)).toBe(0);
      expect(await setup.store.get(scope, key)).toBeUndefined();
      expect(events.of('idempotencyCompleted')).toEqual([]);
    } else {
      await expect(app.finished(job)).resolves.toEqual({ wrote: key });
      expect(await setup.effects(key)).toBe(1);
      expect(await setup.store.get(scope, key)).toMatchObject({ state: 'completed' });
    }
  });
});

describe('SqliteIdempotencyStore: a record left in progress after the handler committed (the worker died)', () => {
  it('shows no transaction marker, and a takeover after the lease completes it cleanly', async () => {
    const database = new Database(join(directory, 'marker.db'), { timeout: 10_000 });
    try {
      const store = new SqliteIdempotencyStore({ database });
      await store.migrate();
      const ref = { scope: 'marker', key: 'k', owner: 'first' };
      const claim = (owner: string) => store.claim({ ...ref, owner, leaseMs: 200, fingerprint: 'f', jobId: '1' });
      expect(await claim('first')).toEqual({ claimed: true, takeover: false });
      const attempt = store.runInTransaction(
        ref,
        async (db) => {
          (db as Database.Database).exec('COMMIT');
          return 'x';
        },
        (value) => ({ result: JSON.stringify(value), ttlMs: 60_000 }),
      );
      await expect(attempt).rejects.toBeInstanceOf(IdempotencyTransactionEndedError);
      await expect(attempt).rejects.toMatchObject({ outcome: 'committed' });
      // Nothing settled it (a crash before fail()): the record stays in progress, its marker committed in `result`.
      const marker = database.prepare('SELECT result FROM unique_jobs_idempotency').get() as { result: string };
      expect(marker.result).toMatch(/^tx:/);
      expect(await store.get('marker', 'k')).toMatchObject({ state: 'in_progress', result: undefined });

      // Once the lease ended, the next claim takes it over and clears the marker; its transaction completes.
      await waitFor('the lease to end', async () => (await claim('second')).claimed);
      const raw = database.prepare('SELECT result, attempts FROM unique_jobs_idempotency').get();
      expect(raw).toEqual({ result: null, attempts: 2 });
      const value = await store.runInTransaction(
        { ...ref, owner: 'second' },
        async () => 'done',
        (v) => ({ result: JSON.stringify(v), ttlMs: 60_000 }),
      );
      expect(value).toBe('done');
      expect(await store.get('marker', 'k')).toMatchObject({ state: 'completed', result: '"done"', attempts: 2 });
    } finally {
      database.close();
    }
  });
});
