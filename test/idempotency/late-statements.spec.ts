// A transactional handler that keeps the `pg` client it was given and runs a statement on it after it returned (a
// timer, a promise chain not awaited): the claim's transaction is over by then (committed, its connection back in the
// pool), so the statement would land outside it — committed on its own, or inside the transaction of whatever job or
// caller holds that connection next. PostgresIdempotencyStore refuses it with a clear error instead, and writes nothing.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Job } from 'bullmq';
import type pg from 'pg';
import { idempotencyOf, PostgresIdempotencyStore, UniqueJobsError, type IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

interface Data {
  key: string;
}

let pool: pg.Pool;
const tables: string[] = [];

beforeAll(() => {
  pool = pgPool(4);
});

afterAll(async () => {
  for (const table of tables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
});

/** A store on tables of its own, an effects table, and its INSERT statement. */
async function storeAndEffects(name: string) {
  const idem = uniqueTable(`idem_${name}`);
  const effects = uniqueTable(`fx_${name}`);
  tables.push(idem, effects);
  await pool.query(`CREATE TABLE ${effects} (id serial PRIMARY KEY, key text NOT NULL)`);
  const store = new PostgresIdempotencyStore({ pool, table: idem });
  await store.migrate();
  return { store, effects, insert: `INSERT INTO ${effects} (key) VALUES ($1)` };
}

describe('PostgresIdempotencyStore: a statement on the transaction client after the handler returned', () => {
  const { start } = useApps('tx-late');

  it('is refused with a UniqueJobsError that says why, and nothing of it is written', async () => {
    const { store, effects, insert } = await storeAndEffects('late');
    const late = deferred<unknown>();
    const app = await start({
      module: { idempotency: { stores: { sql: store } } },
      idempotency: { key: (job: IdempotencyJob<Data>) => job.data.key, store: 'sql', transactional: true },
      handler: async (job: Job) => {
        const { key } = job.data as Data;
        const client = idempotencyOf<pg.PoolClient>(job).transaction!;
        await client.query(insert, [key]);
        // Kept past the handler's end: runs once the job is done and the client is back in the pool.
        setTimeout(() => {
          client.query(insert, [`${key}:late`]).then(late.resolve, late.resolve);
        }, 300);
        return 'ok';
      },
    });

    await app.finished(await app.queue.add('charge', { key: 'k1' }));
    const outcome = await late.promise;
    const count = async (key: string) =>
      Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${effects} WHERE key = $1`, [key])).rows[0].n);
    expect(await count('k1')).toBe(1);
    expect(await count('k1:late')).toBe(0);
    expect(outcome).toBeInstanceOf(UniqueJobsError);
    expect((outcome as Error).message).toMatch(/after that transaction ended/);
  });
  it('a late statement nobody awaits is refused as a process warning, not an unhandled rejection', async () => {
    const { store, effects, insert } = await storeAndEffects('void');
    const warned = deferred<string>();
    const unhandled: unknown[] = [];
    // Jest's `process` is a copy whose listeners Node's own warnings never reach: the call itself is watched.
    const emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation((warning, options) => {
      const code = typeof options === 'object' ? options.code : undefined;
      if (code === 'UNIQUE_JOBS_LATE_STATEMENT') warned.resolve(String(warning));
    });
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const app = await start({
        module: { idempotency: { stores: { sql: store } } },
        idempotency: { key: (job: IdempotencyJob<Data>) => job.data.key, store: 'sql', transactional: true },
        handler: async (job: Job) => {
          const client = idempotencyOf<pg.PoolClient>(job).transaction!;
          setTimeout(() => void client.query(insert, ['void:late']), 100); // fire and forget
          return 'ok';
        },
      });
      await app.finished(await app.queue.add('charge', { key: 'k-void' }));
      expect(await warned.promise).toMatch(/after that transaction ended/);
      const rows = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${effects}`);
      expect(Number(rows.rows[0].n)).toBe(0);
      expect(unhandled).toEqual([]);
    } finally {
      emitWarning.mockRestore();
      process.off('unhandledRejection', onUnhandled);
    }
  });

  // Found by a review (session 38): the warning was written for an awaited statement too, whose caller had its answer.
  it('an awaited late statement is answered by its rejection alone, no process warning', async () => {
    const { store, insert } = await storeAndEffects('awaited');
    const late = deferred<unknown>();
    const warnings: string[] = [];
    const emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation((warning, options) => {
      if (typeof options === 'object' && options.code === 'UNIQUE_JOBS_LATE_STATEMENT') warnings.push(String(warning));
    });
    try {
      const app = await start({
        module: { idempotency: { stores: { sql: store } } },
        idempotency: { key: (job: IdempotencyJob<Data>) => job.data.key, store: 'sql', transactional: true },
        handler: async (job: Job) => {
          const client = idempotencyOf<pg.PoolClient>(job).transaction!;
          setTimeout(() => {
            void (async () => {
              try {
                await client.query(insert, ['awaited:late']);
                late.resolve('written');
              } catch (error) {
                late.resolve(error);
              }
            })();
          }, 100);
          return 'ok';
        },
      });
      await app.finished(await app.queue.add('charge', { key: 'k-awaited' }));
      expect(await late.promise).toBeInstanceOf(UniqueJobsError);
      // The warning, when there is one, is decided one turn of the event loop after the rejection: this one is later.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      emitWarning.mockRestore();
    }
  });

  // Found by a hostile review (session wt-4): pg also takes a callback in the query config (`{ text, callback }`) and
  // a Submittable (pg-cursor, pg-query-stream), whose handleError it calls; the refusal answered neither (the callback
  // never called, a rejected promise nobody listens to: an unhandled rejection).
  it.each([
    [
      'a callback in the query config',
      (client: pg.PoolClient, text: string, values: string[], settle: (outcome: unknown) => void) => {
        void client.query({ text, values, callback: (error: unknown) => settle(error) } as never);
      },
    ],
    [
      'a Submittable',
      (client: pg.PoolClient, text: string, values: string[], settle: (outcome: unknown) => void) => {
        const submittable = {
          text,
          values,
          submit(connection: { query(text: string): void }) {
            settle('submitted');
            connection.query(`SELECT 1`);
          },
          handleError: (error: unknown) => settle(error),
        };
        expect(client.query(submittable as never)).toBe(submittable);
      },
    ],
  ] as const)(
    'answers a late query through %s, refused',
    async (_label, lateQuery) => {
      const { store, insert } = await storeAndEffects('late');
      const late = deferred<unknown>();
      const app = await start({
        module: { idempotency: { stores: { sql: store } } },
        idempotency: { key: (job: IdempotencyJob<Data>) => job.data.key, store: 'sql', transactional: true },
        handler: async (job: Job) => {
          const client = idempotencyOf<pg.PoolClient>(job).transaction!;
          setTimeout(() => lateQuery(client, insert, ['late'], late.resolve), 300);
          return 'ok';
        },
      });
      await app.finished(await app.queue.add('charge', { key: 'k1' }));
      const outcome = await late.promise;
      expect(outcome).toBeInstanceOf(UniqueJobsError);
      expect((outcome as Error).message).toMatch(/after that transaction ended/);
    },
    10_000,
  );
});

// The handler's client is a `pg.PoolClient` the store checked out: its `release()` was passed through. Called in the
// handler, the connection went back to the pool inside the open transaction, and the store's own release then threw
// (the job failed); called later, it released whoever had checked that connection out next (pg hands out the same
// client object again, its `release` rebound to the new checkout).
describe('PostgresIdempotencyStore: release() on the transaction client', () => {
  const { start } = useApps('tx-release');
  const single = pgPool(1); // one connection: the handler's client is the next checkout's
  afterAll(() => single.end());

  /** An app whose transactional handler runs on the one connection of `single`. */
  async function startOnSingle(label: string, handler: (job: Job) => Promise<unknown>) {
    const idem = uniqueTable(`idem_${label}_single`);
    tables.push(idem);
    const store = new PostgresIdempotencyStore({ pool: single, table: idem });
    await store.migrate();
    return start({
      module: { idempotency: { stores: { sql: store } } },
      idempotency: { key: (job: IdempotencyJob<Data>) => job.data.key, store: 'sql', transactional: true },
      handler,
    });
  }

  it('is refused in the handler, and the job completes with its effect committed once', async () => {
    const { effects, insert } = await storeAndEffects('release');
    let refused: unknown;
    let kept: pg.PoolClient | undefined;
    const app = await startOnSingle('release', async (job: Job) => {
      const client = (kept = idempotencyOf<pg.PoolClient>(job).transaction!);
      await client.query(insert, [(job.data as Data).key]);
      try {
        client.release();
      } catch (error) {
        refused = error;
      }
      return 'ok';
    });

    await expect(app.finished(await app.queue.add('charge', { key: 'k-release' }))).resolves.toBe('ok');
    expect(refused).toBeInstanceOf(UniqueJobsError);
    expect((refused as Error).message).toMatch(/release\(\) was called on the client/);
    const rows = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${effects} WHERE key = 'k-release'`);
    expect(Number(rows.rows[0].n)).toBe(1);

    // Later, with the connection checked out by someone else: their checkout is left alone.
    const mine = await single.connect();
    try {
      expect(() => kept!.release()).toThrow(UniqueJobsError);
      await expect(mine.query('SELECT 1 AS one')).resolves.toMatchObject({ rows: [{ one: 1 }] });
      expect(single.idleCount).toBe(0);
    } finally {
      mine.release();
    }
    expect(single.idleCount).toBe(1);
  }, 15_000);

  // end() likewise (helper-125): ended later, it closed the connection of whoever had checked it out next ("Client was
  // closed and is not queryable").
  it('end() is refused in the handler and later, and the next checkout of that connection keeps it', async () => {
    let refused: unknown;
    let kept: pg.PoolClient | undefined;
    const app = await startOnSingle('end', async (job: Job) => {
      kept = idempotencyOf<pg.PoolClient>(job).transaction!;
      refused = await kept.end().catch((error: unknown) => error);
      return 'ok';
    });
    await expect(app.finished(await app.queue.add('charge', { key: 'k-end' }))).resolves.toBe('ok');
    expect(refused).toBeInstanceOf(UniqueJobsError);
    expect((refused as Error).message).toMatch(/end\(\) was called on the client/);

    const mine = await single.connect();
    try {
      const answered = deferred<unknown>();
      kept!.end((error) => answered.resolve(error));
      expect(await answered.promise).toBeInstanceOf(UniqueJobsError);
      await expect(mine.query('SELECT 1 AS one')).resolves.toMatchObject({ rows: [{ one: 1 }] });
    } finally {
      mine.release();
    }
  }, 15_000);
});
