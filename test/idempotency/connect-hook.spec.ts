// The `connect` the library gives a pg pool the first time it opens a store transaction on it (connection-watch.ts
// hookConnect), seen from user code: every form of checkout answers as on a pool never hooked, instrumentation added
// later (on the prototype or on the pool) still sees the checkouts and does not undo the hand-over watch, and a
// handler's own transactions and checkouts inside the store's pass straight through.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { drizzle } from 'drizzle-orm/node-postgres';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { DrizzleIdempotencyStore, IdempotencyConnectionLostError } from '../../lib/index.js';
import { PgProxy } from '../support/pg-proxy.js';
import { useIdempotencyTable } from './postgres-store-kinds.js';
import { databaseUrl } from '../support/postgres.js';

describe('the connect the library gives a pg pool', () => {
  const { table, uncaught } = useIdempotencyTable('connect_hook');
  let proxy: PgProxy;
  let n = 0;

  beforeAll(async () => {
    proxy = await PgProxy.start();
  });
  afterAll(async () => {
    await proxy.close();
  });

  const run = <T>(store: DrizzleIdempotencyStore<never>, key: string, body: () => Promise<T>) =>
    store.runInTransaction({ scope: 'h', key, owner: 'o' }, body, (v) => ({
      result: JSON.stringify(v),
      ttlMs: 60_000,
    }));
  const claim = (store: DrizzleIdempotencyStore<never>, key: string) =>
    store.claim({ scope: 'h', key, owner: 'o', leaseMs: 60_000, fingerprint: undefined, jobId: '1' });

  it('user code on a hooked pool: every form answers as on a pool never hooked', async () => {
    const forms = async (pool: pg.Pool) => {
      const out: string[] = [];
      const c1 = await pool.connect();
      c1.release();
      out.push('promise ok');
      out.push(
        await new Promise<string>((resolve) =>
          pool.connect((err, client, done) => {
            done();
            resolve(err ? `cb err ${err.message}` : `cb ok ${typeof client}`);
          }),
        ),
      );
      const unbound = pool.connect;
      try {
        await (unbound as () => Promise<pg.PoolClient>)();
        out.push('unbound ok');
      } catch (e) {
        out.push(`unbound ${(e as Error).constructor.name}`);
      }
      out.push(`query ${String((await pool.query<{ x: number }>('SELECT 1 AS x')).rows[0].x)}`);
      out.push(
        await new Promise<string>((r) =>
          pool.query<{ x: number }>('SELECT 2 AS x', (e, res) => r(e ? 'qcb err' : `qcb ${String(res.rows[0].x)}`)),
        ),
      );
      out.push(`length ${pool.connect.length}`);
      out.push(`instanceof ${pool instanceof pg.Pool} ${(Object.getPrototypeOf(pool) as object).constructor.name}`);
      await pool.end();
      out.push(
        await pool.connect().then(
          () => 'ended ok',
          (e: Error) => `ended ${e.message}`,
        ),
      );
      out.push(await new Promise<string>((r) => pool.connect((e) => r(e ? `ended cb ${e.message}` : 'ended cb ok'))));
      return out;
    };
    const plain = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
    const hooked = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
    const store = new DrizzleIdempotencyStore({ db: drizzle(hooked), table }) as DrizzleIdempotencyStore<never>;
    const key = `forms${n++}`;
    await claim(store, key);
    await run(store, key, async () => 'x'); // the pool is hooked now
    expect(Object.prototype.hasOwnProperty.call(hooked, 'connect')).toBe(true);
    expect(await forms(hooked)).toEqual(await forms(plain));
  });

  it('instrumentation patching pg.Pool.prototype.connect after the hook still sees the pool’s checkouts', async () => {
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
    const store = new DrizzleIdempotencyStore({ db: drizzle(pool), table }) as DrizzleIdempotencyStore<never>;
    const proto = pg.Pool.prototype as unknown as { connect: (...a: unknown[]) => unknown };
    const original = proto.connect;
    let seen = 0;
    try {
      const key = `apm${n++}`;
      await claim(store, key);
      await run(store, key, async () => 'x'); // hooked
      proto.connect = function (this: unknown, ...args: unknown[]) {
        seen++;
        return original.apply(this, args);
      };
      await pool.query('SELECT 1');
      (await pool.connect()).release();
      expect(seen).toBe(2);
    } finally {
      proto.connect = original;
      await pool.end();
    }
  });

  it('a handler opening its own db.transaction() and pool.connect() inside the store transaction', async () => {
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 3 });
    const db = drizzle(pool);
    const store = new DrizzleIdempotencyStore({ db, table }) as DrizzleIdempotencyStore<never>;
    try {
      const key = `nested${n++}`;
      await claim(store, key);
      const value = await run(store, key, async () => {
        const inner = await db.transaction(async (tx) => {
          const r = await tx.execute(sql`SELECT pg_backend_pid() AS pid`);
          const sp = await tx.transaction(async (t2) => (await t2.execute(sql`SELECT 1 AS one`)).rows[0]);
          return [r.rows[0], sp];
        });
        const c = await pool.connect();
        const listeners = c.listenerCount('error');
        c.release();
        return { inner: inner.length, listeners };
      });
      expect(value).toEqual({ inner: 2, listeners: 0 });
      expect(pool.totalCount - pool.idleCount).toBe(0);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it.each([false, true])(
    'connect replaced by the user after the hook (%s): the hand-over is still watched',
    async (rewrap) => {
      const pool = new pg.Pool({ connectionString: proxy.url, max: 1 });
      pool.on('error', () => undefined);
      const store = new DrizzleIdempotencyStore({ db: drizzle(pool), table }) as DrizzleIdempotencyStore<never>;
      try {
        const warm = `warm${n++}`;
        await claim(store, warm);
        await run(store, warm, async () => 'w'); // hooked
        // The user's instrumentation, installed later: forwards to pg.Pool.prototype.connect (every argument).
        const proto = pg.Pool.prototype.connect as (...a: unknown[]) => unknown;
        if (rewrap)
          (pool as unknown as { connect: unknown }).connect = function (this: pg.Pool, ...args: unknown[]) {
            return proto.apply(this, args);
          };
        const key = `rewrapped${n++}`;
        await claim(store, key);
        const terminated = proxy.terminateAfterReply(/hook_probe/);
        const busy = pool.query(`SELECT 'hook_probe' AS probe`);
        const attempt = run(store, key, async () => 'x');
        await terminated;
        await busy;
        const outcome = await attempt.then(
          (v) => `resolved ${v}`,
          (e: unknown) => (e instanceof IdempotencyConnectionLostError ? 'lost' : `rejected ${(e as Error).message}`),
        );
        expect({ outcome, uncaught: uncaught.map((e) => (e as Error).message) }).toEqual({
          outcome: 'lost',
          uncaught: [],
        });
      } finally {
        uncaught.length = 0;
        await pool.end();
      }
    },
  );
});
