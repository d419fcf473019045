// An @IdempotencyKey claim (plain mode) whose answer is read only after its lease ended (an event-loop stall between
// the send and the read: another job's CPU-bound handler in the same process, a GC pause). The attempt confirms the
// claim by a renewal (owner-checked) before its handler starts: when another delivery took the key over meanwhile, it
// meets that delivery's record as any duplicate does (here: replays its result) and its handler does not start; when
// nobody did, the handler runs once on the renewed lease. It used to start the handler on the lease that had ended,
// beside the delivery that took the key over: the effect twice, detected only afterwards (`idempotencyLeaseLost`).
// The stall is simulated on the store's command: the claim is applied, and its answer handed back only once its lease
// has ended (and, in the first case, the other delivery has completed the key). The Redis store (the script on the
// library's own client) and the PostgreSQL store (its `claim`), which share the runner's plain mode.
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import pg from 'pg';
import type { IdempotencyJob, IdempotencyStore } from '../../lib/index.js';
import { PostgresIdempotencyStore } from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import { RedisIdempotencyStore } from '../../lib/idempotency/stores/redis-idempotency.store.js';
import { RedisScripts, scriptSources, type ScriptName } from '../../lib/redis/redis-scripts.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { redisClient } from '../support/redis.js';

const LEASE_MS = 1_000;

type Call = (...args: unknown[]) => Promise<unknown>;

/**
 * `call`, whose first answer is handed back late: after the command applied, once `meanwhile` resolves and more than
 * `LEASE_MS` after the call. `late()` counts the answers delayed so (one at most).
 */
function answerFirstLate(call: Call, meanwhile: () => Promise<void>): { wrapped: Call; late: () => number } {
  let late = 0;
  const wrapped = async function (this: unknown, ...args: unknown[]) {
    const calledAt = Date.now();
    const answer = await call.apply(this, args);
    if (late > 0) return answer;
    late++;
    await meanwhile();
    while (Date.now() - calledAt <= LEASE_MS) await new Promise((resolve) => setTimeout(resolve, 10));
    return answer;
  };
  return { wrapped, late: () => late };
}

/** Replaces the library's command of script `name` on `client` by `wrap` of it (defining the library's commands). */
function wrapScript(client: Redis, name: ScriptName, wrap: (original: Call) => Call): void {
  new RedisScripts(client); // defines the library's commands on the client (the module reuses them)
  const { command } = scriptSources().find((source) => source.name === name) as unknown as { command: string };
  const commands = client as unknown as Record<string, Call>;
  commands[command] = wrap(commands[command]);
}

/** Counts the calls of `call`. */
function counted(call: Call): { wrapped: Call; calls: () => number } {
  let calls = 0;
  const wrapped = function (this: unknown, ...args: unknown[]) {
    calls++;
    return call.apply(this, args);
  };
  return { wrapped, calls: () => calls };
}

const key = (job: IdempotencyJob<{ id: string }>) => job.data.id;

/** One store under test: the app's options for it, the record it holds, and the late first claim. */
interface Setup {
  options: Partial<TestAppOptions>;
  /** The store, as the app's records are read (the Redis store under the app's prefix). */
  store(app: TestApp): IdempotencyStore;
  /** Makes the first claim's answer late (see {@link answerFirstLate}). */
  lateClaim(meanwhile: () => Promise<void>): { late: () => number };
  /** The store's renewals so far. */
  renewals(): number;
}

describe('an idempotency claim answered after its lease ended (plain mode)', () => {
  const { redis, start, keysOf } = useApps('outage-late-claim');
  const pool = pgPool(4);
  const tables: string[] = [];
  // The library's client of each Redis test, quit after the apps that use it are closed (it does not close a client
  // it is given).
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const client of clients.splice(0)) await client.quit();
    for (const table of tables.splice(0)) await pool.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await pool.end();
  });

  const setups: Record<'Redis' | 'PostgreSQL', () => Promise<Setup>> = {
    Redis: async () => {
      const client = redisClient();
      clients.push(client);
      let renewals = () => 0;
      wrapScript(client, 'idempotencyRenew', (original) => {
        const made = counted(original);
        renewals = made.calls;
        return made.wrapped;
      });
      return {
        options: { module: { connection: client } },
        store: (app) => new RedisIdempotencyStore({ client: redis, prefix: app.prefix }),
        lateClaim(meanwhile) {
          let late = () => 0;
          wrapScript(client, 'idempotencyClaim', (original) => {
            const made = answerFirstLate(original, meanwhile);
            late = made.late;
            return made.wrapped;
          });
          return { late: () => late() };
        },
        renewals: () => renewals(),
      };
    },
    PostgreSQL: async () => {
      const table = uniqueTable('outage_late_claim');
      tables.push(table);
      const store = new PostgresIdempotencyStore({ pool, table });
      await store.migrate();
      const renew = counted(store.renew.bind(store) as Call);
      store.renew = renew.wrapped as typeof store.renew;
      return {
        options: { module: { idempotency: { stores: { sql: store } } } },
        store: () => store,
        lateClaim(meanwhile) {
          const made = answerFirstLate(store.claim.bind(store) as Call, meanwhile);
          store.claim = made.wrapped as typeof store.claim;
          return { late: made.late };
        },
        renewals: renew.calls,
      };
    },
  };

  /** Starts the app of a setup: one handler, two jobs at once (the late one and its duplicate), a short lease. */
  async function startWith(setup: Setup, sql: boolean): Promise<TestApp> {
    return start({
      ...setup.options,
      idempotency: { key, lease: LEASE_MS, ...(sql ? { store: 'sql' } : {}) },
      worker: { concurrency: 2 },
      handler: async (job) => ({ by: job.id }),
    });
  }

  describe.each(['Redis', 'PostgreSQL'] as const)('%s store', (name) => {
    const sql = name === 'PostgreSQL';

    it('another delivery took the key over meanwhile: the handler does not start, the key completes once', async () => {
      const setup = await setups[name]();
      const started = deferred<TestApp>();
      let duplicate: Job | undefined;
      const stall = setup.lateClaim(async () => {
        // A duplicate delivery of the key: it waits for the claim's lease to end, takes the key over, runs and
        // completes it, all before the claim's answer is read.
        const { queue, finished } = await started.promise;
        duplicate = await queue.add('sync', { id: 'k' });
        await finished(duplicate);
      });
      const app = await startWith(setup, sql);
      started.resolve(app);
      const events = new EventLog(app);
      const job = await app.queue.add('sync', { id: 'k' });
      // The late delivery replays the result of the one that took its key over.
      expect(await app.finished(job)).toEqual({ by: duplicate?.id });
      expect(stall.late()).toBe(1);
      expect(app.runs.map((run) => run.id)).toEqual([duplicate?.id]);
      expect(events.of('idempotencyLeaseLost')).toEqual([]);
      expect(events.of('idempotencyClaimed').map((event) => [event.jobId, event.takeover])).toEqual([
        [duplicate?.id, true],
      ]);
      expect(events.of('idempotencyReplayed').map((event) => event.jobId)).toEqual([job.id]);
      // Nothing stuck: the key is completed by the duplicate, and (Redis) nothing else of the library is left.
      const record = await setup.store(app).get(`${app.queue.name}:sync`, 'k');
      expect(record).toMatchObject({
        state: 'completed',
        jobId: duplicate?.id,
        result: JSON.stringify({ by: duplicate?.id }),
      });
      if (!sql) {
        const recordKey = (setup.store(app) as RedisIdempotencyStore).recordKey(`${app.queue.name}:sync`, 'k');
        expect(await keysOf(app)).toEqual([recordKey]);
      }
    });

    it('nobody took the key over: the handler runs once on the renewed lease, no lease reported lost', async () => {
      const setup = await setups[name]();
      const started = deferred<TestApp>();
      const stall = setup.lateClaim(async () => {
        // The lease has ended in the store (the record is no longer live), but nobody claimed the key.
        const app = await started.promise;
        while (await setup.store(app).get(`${app.queue.name}:sync`, 'k')) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      });
      const app = await startWith(setup, sql);
      started.resolve(app);
      const events = new EventLog(app);
      const job = await app.queue.add('sync', { id: 'k' });
      expect(await app.finished(job)).toEqual({ by: job.id });
      expect(stall.late()).toBe(1);
      expect(app.runs.map((run) => run.id)).toEqual([job.id]);
      expect(events.of('idempotencyLeaseLost')).toEqual([]);
      expect(events.of('idempotencyClaimed').map((event) => event.takeover)).toEqual([false]);
      expect(setup.renewals()).toBeGreaterThanOrEqual(1); // the late claim was confirmed
      const record = await setup.store(app).get(`${app.queue.name}:sync`, 'k');
      expect(record).toMatchObject({ state: 'completed', jobId: job.id });
    });

    it('a claim answered in time costs no renewal before a short handler', async () => {
      const setup = await setups[name]();
      const app = await startWith(setup, sql);
      const job = await app.queue.add('sync', { id: 'k' });
      expect(await app.finished(job)).toEqual({ by: job.id });
      expect(setup.renewals()).toBe(0);
    });
  });
});
