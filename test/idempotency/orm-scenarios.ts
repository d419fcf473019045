// The effect-once scenarios every ORM-backed store must pass, across real worker processes
// (test/fixtures/orm-worker.ts, compiled into .build by the test command): concurrent duplicates from several processes
// make one effect per key; a handler failure rolls back both the effect and the claim; a killed holder is taken over
// once; a dropped connection fails the attempt without killing the process (PostgreSQL). The effect table has no
// unique constraint: a double effect would show as a second row.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { SqliteIdempotencyStore } from '../../lib/idempotency/stores/sqlite-idempotency.store.js';
import type { IdempotencyRecord, IdempotencyStore } from '../../lib/index.js';
import type { OrmEffectResult, OrmHeldRun } from '../fixtures/orm-worker.js';
import { spawnFixture, type Fixture } from '../support/fixtures.js';
import { Leftovers } from '../support/leftovers.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { openQueueEvents, redisClient, redisOptions, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/** An idempotency or attempt event a worker process recorded. */
type Recorded = { worker: string; type: string; jobId?: string; error?: string; takeover?: boolean } & Record<
  string,
  unknown
>;

interface EffectRow {
  id: string;
  key: string;
  job_id: string;
  worker: string;
  attempt: number;
  takeover: boolean;
}

/**
 * Defines the scenarios for one STORE kind of orm-worker on one database.
 *
 * @param kind `typeorm`, `drizzle`, `cls-typeorm`, `cls-drizzle` or `pg`.
 * @param scenarios Which scenarios to run (default: all that the database supports).
 */
export function describeOrmScenarios(
  kind: string,
  db: 'postgres' | 'sqlite',
  scenarios: readonly ('duplicates' | 'killed' | 'dropped')[] = db === 'postgres'
    ? ['duplicates', 'killed', 'dropped']
    : ['duplicates', 'killed'],
): void {
  describe(`@IdempotencyKey transactional through ${kind} on ${db}, across worker processes`, () => {
    const idemTable = db === 'postgres' ? uniqueTable(`idem_${kind}`) : 'unique_jobs_idempotency';
    // Opened in beforeAll, so that a run filtering these tests out leaves nothing open.
    let redis: Redis;
    let pool: pg.Pool;
    let leftovers: Leftovers;
    let directory: string;
    let sqliteFile: string;
    let sqlite: Database.Database | undefined;
    let reader: IdempotencyStore;

    /** A fresh queue, effects table and worker environment. */
    async function scenario(label: string) {
      const queueName = uniqueName(`${kind}-${label}`);
      const probe = uniqueName(`probe-${kind}-${label}`);
      const prefix = uniqueName('ujorm');
      leftovers.namespaces.push(prefix, probe);
      const effects = uniqueTable(`fx_${kind}_${label}`);
      if (db === 'postgres') {
        leftovers.tables.push(effects);
        await pool.query(`CREATE TABLE ${effects} (id serial PRIMARY KEY, key text NOT NULL, job_id text NOT NULL,
          worker text NOT NULL, attempt integer NOT NULL, takeover boolean NOT NULL)`);
      } else {
        sqlite!.exec(`CREATE TABLE ${effects} (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,
          job_id TEXT NOT NULL, worker TEXT NOT NULL, attempt INTEGER NOT NULL, takeover INTEGER NOT NULL)`);
      }
      const queue = new Queue<{ key: string }>(queueName, { connection: redisOptions() });
      const { queues } = leftovers;
      const events = await openQueueEvents(queueName);
      queues.push(queue);
      leftovers.queueEvents.push(events);
      const base = {
        QUEUE: queueName,
        PREFIX: prefix,
        PROBE: probe,
        STORE: kind,
        DB: db,
        SQLITE_FILE: sqliteFile,
        IDEM_TABLE: idemTable,
        EFFECTS_TABLE: effects,
        LEASE: '1000',
      };
      return {
        queue,
        events,
        probe,
        scope: `${queueName}:effect`,
        worker: async (env: Record<string, string>): Promise<Fixture & { logs: () => string }> => {
          const fixture = spawnFixture('orm-worker', { ...base, ...env });
          leftovers.fixtures.push(fixture);
          let logs = '';
          fixture.child.stderr.on('data', (chunk: Buffer | string) => (logs += String(chunk)));
          await fixture.waitFor((m) => m.ready === true);
          return { ...fixture, logs: () => logs };
        },
        rows: async (): Promise<EffectRow[]> => {
          const select = `SELECT CAST(id AS TEXT) AS id, key, job_id, worker, attempt, takeover FROM ${effects} ORDER BY id`;
          const found =
            db === 'postgres'
              ? (await pool.query<EffectRow>(select)).rows
              : (sqlite!.prepare(select).all() as EffectRow[]).map((row) => ({
                  ...row,
                  takeover: Boolean(row.takeover),
                }));
          return found;
        },
        recorded: async (): Promise<Recorded[]> =>
          (await redis.lrange(`${probe}:events`, 0, -1)).map((line) => JSON.parse(line) as Recorded),
      };
    }

    beforeAll(async () => {
      redis = redisClient();
      pool = pgPool(3);
      leftovers = new Leftovers(redis, pool);
      directory = mkdtempSync(join(tmpdir(), `idem-${kind}-`));
      sqliteFile = join(directory, 'app.db');
      if (db === 'sqlite') {
        sqlite = new Database(sqliteFile, { timeout: 10_000 });
        sqlite.pragma('journal_mode = WAL');
        const store = new SqliteIdempotencyStore({ database: sqlite, table: idemTable });
        await store.migrate();
        reader = store;
      } else {
        // The workers migrate too (each in its store factory); this reader sees the same table.
        const store = new PostgresIdempotencyStore({ pool, table: idemTable });
        await store.migrate();
        reader = store;
      }
    });

    afterEach(async () => {
      await leftovers.cleanUp();
    });

    afterAll(async () => {
      if (db === 'postgres') await pool.query(`DROP TABLE IF EXISTS ${idemTable}`);
      await pool.end();
      await redis.quit();
      sqlite?.close();
      rmSync(directory, { recursive: true, force: true });
    });

    const record = (scope: string, key: string): Promise<IdempotencyRecord | undefined> => reader.get(scope, key);

    if (scenarios.includes('duplicates')) {
      it('3 processes, concurrent duplicates: one effect per key; a failing first attempt leaves neither its effect nor its claim', async () => {
        const s = await scenario('dup');
        // The first worker to take 12 deliveries stops fetching (it may have 2 more by then), and only one stops: the
        // 24 deliveries and their retries need another worker however the machine schedules the three. A lease no
        // holder outlives here: on SQLite a claim is committed before its transaction, and a failed attempt's claim
        // stays until its release; three processes queued on the one write lock can take longer than 1 s to get there,
        // and a claim whose lease ran out is taken over (docs/idempotency.md), which this scenario is not about.
        await Promise.all(
          ['A', 'B', 'C'].map((LABEL) =>
            s.worker({ LABEL, CONCURRENCY: '2', WORK_MS: '20', MAX_DELIVERIES: '12', LEASE: '10000' }),
          ),
        );
        const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'fail-1'];
        const deliveries = [1, 2, 3, 4].flatMap(() => keys);
        const jobs = await s.queue.addBulk(
          deliveries.map((key) => ({ name: 'effect', data: { key }, opts: { attempts: 2 } })),
        );
        const results = (await Promise.all(
          jobs.map((job) => job.waitUntilFinished(s.events, 45_000)),
        )) as OrmEffectResult[];

        const rows = await s.rows();
        // One effect per key: the first attempt of fail-1 wrote one too, and it was rolled back with its claim.
        expect(rows.map((row) => row.key).sort()).toEqual([...keys].sort());
        expect(rows.find((row) => row.key === 'fail-1')).toMatchObject({ attempt: 2, takeover: false });
        // Every delivery returned its key's one effect, whether it ran it or replayed it.
        jobs.forEach((job, i) => {
          const row = rows.find((r) => r.key === job.data.key)!;
          expect(results[i]).toMatchObject({ key: row.key, effectId: row.id, jobId: row.job_id });
        });
        for (const key of keys) {
          // attempts 1: the failed attempt released its claim (no takeover), and the retry claimed afresh.
          expect(await record(s.scope, key)).toMatchObject({ state: 'completed', attempts: 1 });
        }
        const recorded = await waitFor('the events', async () => {
          const all = await s.recorded();
          return (
            all.filter((e) => e.type === 'idempotencyCompleted').length === keys.length &&
            all.filter((e) => e.type === 'delivered').length >= deliveries.length &&
            all
          );
        });
        // The deliveries were spread over processes (not all taken by one).
        expect(
          new Set(recorded.filter((e) => e.type === 'delivered').map((e) => e.worker)).size,
        ).toBeGreaterThanOrEqual(2);
        // Every failed first attempt (of any delivery of fail-1 that got to run) released its claim.
        const released = recorded.filter((e) => e.type === 'idempotencyReleased');
        expect(released.length).toBeGreaterThanOrEqual(1);
        expect(new Set(released.map((e) => e.key))).toEqual(new Set(['fail-1']));
        expect(recorded.filter((e) => e.type === 'idempotencyClaimed' && e.takeover)).toEqual([]);
        expect(recorded.filter((e) => ['error', 'idempotencyLeaseLost'].includes(e.type))).toEqual([]);
        // The events name the store as registered.
        expect(new Set(recorded.filter((e) => e.type.startsWith('idempotency')).map((e) => e.store))).toEqual(
          new Set(['sql']),
        );
      }, 60_000);
    }

    if (scenarios.includes('killed')) {
      it('a holder SIGKILLed mid-handler: another process takes the key over once, one effect', async () => {
        const s = await scenario('kill');
        const timing = { CONCURRENCY: '1', LOCK_DURATION: '1000', STALLED_INTERVAL: '300' };
        const a = await s.worker({ ...timing, LABEL: 'A', HOLD: 'hang-once' });
        const job = await s.queue.add('effect', { key: 'K' });
        const held = (await a.waitFor((m) => 'held' in m)).held as OrmHeldRun;
        expect(held).toMatchObject({ worker: 'A', jobId: job.id, key: 'K', takeover: false });
        expect(await s.rows()).toEqual([]); // written, not committed
        await s.worker({ ...timing, LABEL: 'B', LOCK_DURATION: '10000' });
        a.child.kill('SIGKILL');
        expect(await a.exited).toMatchObject({ signal: 'SIGKILL' });

        const result = (await job.waitUntilFinished(s.events, 30_000)) as OrmEffectResult;
        expect(result).toMatchObject({ key: 'K', worker: 'B', takeover: true });
        expect(await s.rows()).toEqual([
          { id: result.effectId, key: 'K', job_id: job.id, worker: 'B', attempt: 1, takeover: true },
        ]);
        // PostgreSQL claims inside the transaction: A's claim rolled back with it, so B's is the key's first. SQLite
        // claims before the transaction: B took A's claim over.
        const attempts = db === 'postgres' ? 1 : 2;
        expect(await record(s.scope, 'K')).toMatchObject({ state: 'completed', attempts });
        const claims = await waitFor('both claims', async () => {
          const found = (await s.recorded()).filter((e) => e.type === 'idempotencyClaimed');
          return found.length === 2 && found;
        });
        expect(claims.map(({ worker, takeover }) => ({ worker, takeover }))).toEqual([
          { worker: 'A', takeover: false },
          { worker: 'B', takeover: true },
        ]);
      }, 60_000);
    }

    if (scenarios.includes('dropped')) {
      it("the transaction's connection terminated while the handler awaits: the attempt fails, the retry makes the one effect, the process lives", async () => {
        const s = await scenario('drop');
        const w = await s.worker({ LABEL: 'W', CONCURRENCY: '2', HOLD: 'gate-once' });
        const job = await s.queue.add('effect', { key: 'K' }, { attempts: 2 });
        const held = (await w.waitFor((m) => 'held' in m)).held as OrmHeldRun;
        expect(held.pid).toEqual(expect.any(Number));
        const { rows } = await pool.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [held.pid]);
        expect(rows).toEqual([{ ok: true }]);
        await waitFor('the backend to be gone', async () => {
          const found = await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [held.pid]);
          return found.rowCount === 0;
        });
        await redis.rpush(`${s.probe}:gate`, 'go');

        const result = (await job.waitUntilFinished(s.events, 30_000)) as OrmEffectResult;
        expect(result).toMatchObject({ key: 'K', worker: 'W', attempt: 2 });
        expect(await s.rows()).toEqual([
          { id: result.effectId, key: 'K', job_id: job.id, worker: 'W', attempt: 2, takeover: false },
        ]);
        const recorded = await s.recorded();
        expect(recorded.filter((e) => e.type === 'attemptFailed')).toEqual([
          expect.objectContaining({ jobId: job.id, error: 'IdempotencyConnectionLostError' }),
        ]);
        // Reported once (an `error` event, and a log line naming the store as registered); the claim was released.
        expect(recorded.filter((e) => e.type === 'error')).toEqual([
          expect.objectContaining({ jobId: job.id, key: 'K', error: 'IdempotencyConnectionLostError' }),
        ]);
        expect(w.logs()).toContain(
          `Idempotency store "sql" failed for job ${job.id} (key "K"): The database connection of the transaction of idempotency key "K"`,
        );
        expect(recorded.some((e) => e.type === 'idempotencyReleased')).toBe(true);
        // The process is alive and keeps working.
        expect(w.child.exitCode).toBeNull();
        const next = await s.queue.add('effect', { key: 'K2' });
        expect(await next.waitUntilFinished(s.events, 30_000)).toMatchObject({ key: 'K2', worker: 'W' });
        expect(w.child.exitCode).toBeNull();
      }, 60_000);
    }
  });
}
