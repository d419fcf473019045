// Deliveries waiting for a key held through a PostgreSQL store. In transactional mode the holder's claim is part of
// its transaction, not committed before the handler's writes: a duplicate's claim sees the key's advisory lock taken
// and moves to delayed like any in-progress key, holding neither a worker slot nor a pool connection, and the holder
// wakes it when it settles. The lease is ten minutes: a duplicate that waited for it would never finish within the
// test.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type pg from 'pg';
import { idempotencyOf, PostgresIdempotencyStore, type IdempotencyJob, type PgClientLike } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

interface Charge {
  orderId: string;
  tag: string;
}

describe.each([true, false])(
  'PostgreSQL store (transactional: %s): deliveries waiting for a key in progress',
  (transactional) => {
    const table = uniqueTable('idem_waiting');
    const effects = uniqueTable('fx_waiting');
    let pool: pg.Pool;
    let store: PostgresIdempotencyStore;
    const { start } = useApps('wake-sql');

    beforeAll(async () => {
      // Two connections: the holder's transaction takes one; a claim that waited on its row lock would take the other.
      pool = pgPool(2);
      store = new PostgresIdempotencyStore({ pool, table });
      await store.migrate();
      await pool.query(`CREATE TABLE ${effects} (id serial PRIMARY KEY, order_id text NOT NULL, tag text NOT NULL)`);
    });
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}, ${effects}`);
      await pool.end();
    });

    it('move to delayed while the holder runs, and replay its result the moment it completes', async () => {
      const gates = new Gates().hold('holder');
      const app = await start({
        module: { idempotency: { stores: { sql: store } } },
        idempotency: {
          key: (job: IdempotencyJob<Charge>) => job.data.orderId,
          lease: 10 * 60_000,
          fingerprint: false,
          store: 'sql',
          transactional,
        },
        worker: { concurrency: 4 },
        handler: async (job: Job) => {
          const data = job.data as Charge;
          const insert = `INSERT INTO ${effects} (order_id, tag) VALUES ($1, $2) RETURNING id`;
          const values = [data.orderId, data.tag];
          const { rows } = transactional
            ? await idempotencyOf<PgClientLike>(job).transaction!.query(insert, values)
            : await pool.query(insert, values);
          await gates.handler(job);
          return { effect: Number((rows[0] as { id: number }).id), by: data.tag };
        },
      });
      const events = new EventLog(app);
      const orderId = `o-${String(transactional)}`;
      const holder = await app.queue.add('charge', { orderId, tag: 'holder' });
      await gates.started('holder');
      const waiting = await Promise.all(['a', 'b', 'c'].map((tag) => app.queue.add('charge', { orderId, tag })));
      // Delayed while the holder's transaction still holds the row: none of them waits on the lock.
      for (const job of waiting) {
        await events.next((e) => e.type === 'idempotencyInProgress' && e.jobId === job.id && e.action === 'delayed');
        expect(await app.queue.getJobState(job.id!)).toBe('delayed');
      }
      // Plain mode: the claim is committed, the record in progress. Transactional: nothing is committed yet.
      const record = await store.get(`${app.queue.name}:charge`, orderId);
      if (transactional) expect(record).toBeUndefined();
      else expect(record).toMatchObject({ state: 'in_progress' });

      gates.release('holder');
      const result = await app.finished(holder);
      expect(result).toEqual({ effect: expect.any(Number), by: 'holder' });
      for (const job of waiting) await expect(app.finished(job)).resolves.toEqual(result);
      expect(app.runs.map((job) => (job.data as Charge).tag)).toEqual(['holder']);
      const { rows } = await pool.query(`SELECT tag FROM ${effects} WHERE order_id = $1`, [orderId]);
      expect(rows).toEqual([{ tag: 'holder' }]);
    });
  },
);
