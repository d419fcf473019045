// The seed's story: ChargeCustomerJob for order 48213 must charge the customer once, however it is delivered. Worker
// processes (test/fixtures/idempotency-worker.ts, MODE=charge) run it under @IdempotencyKey with the PostgreSQL store in
// transactional mode: the local charge row commits with the completed record. The payment provider is simulated by
// tables written outside that transaction: it honours the Idempotency-Key it is given (UNIQUE idempotency_key, a
// repeated key returns the existing charge) and logs every call in a table without a unique constraint.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { PostgresIdempotencyStore } from '../../lib/idempotency/stores/postgres-idempotency.store.js';
import type { ChargeData, ChargeResult, HeldRun, RecordedEvent } from '../fixtures/idempotency-worker.js';
import { spawnFixture, type Fixture } from '../support/fixtures.js';
import { Leftovers } from '../support/leftovers.js';
import { pgPool, uniqueTable } from '../support/postgres.js';
import { redisClient, openQueueEvents, redisOptions, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

const ORDER: ChargeData = { orderId: 48213, customerId: 'cus_4821', amountCents: 12_900 };
const JOB = 'ChargeCustomerJob';

interface Tables {
  charges: string;
  providerCharges: string;
  providerCalls: string;
}

describe('ChargeCustomerJob for order 48213 is charged once', () => {
  const redis = redisClient();
  const blocking = new Redis(redisOptions());
  const pool = pgPool(4);
  const idemTable = uniqueTable('idem_ct');
  const store = new PostgresIdempotencyStore({ pool, table: idemTable });
  const leftovers = new Leftovers(redis, pool);
  const { queues, queueEvents, namespaces, tables, fixtures } = leftovers;

  /** A fresh queue, its events, Redis namespaces, tables and the env of its worker processes. */
  async function scenario(label: string) {
    const queueName = uniqueName(`charge-${label}`);
    const prefix = uniqueName('ujct');
    const probe = uniqueName(`probe-ct-${label}`);
    namespaces.push(prefix, probe);
    const base = uniqueTable(`ct_${label}`);
    const t: Tables = {
      charges: `${base}_charges`,
      providerCharges: `${base}_pcharges`,
      providerCalls: `${base}_pcalls`,
    };
    tables.push(t.charges, t.providerCharges, t.providerCalls);
    // Our charges: no unique constraint, so a second charge of the order would be a second row.
    await pool.query(`CREATE TABLE ${t.charges} (id bigserial PRIMARY KEY, order_id integer NOT NULL,
      provider_charge_id text NOT NULL, amount_cents integer NOT NULL, job_id text NOT NULL, worker text NOT NULL)`);
    // The provider: one charge per Idempotency-Key, and a log of every call it received.
    await pool.query(`CREATE TABLE ${t.providerCharges} (id bigserial PRIMARY KEY,
      idempotency_key text NOT NULL UNIQUE, customer_id text NOT NULL, amount_cents integer NOT NULL)`);
    await pool.query(`CREATE TABLE ${t.providerCalls} (id bigserial PRIMARY KEY, idempotency_key text NOT NULL,
      worker text NOT NULL)`);

    const queue = new Queue(queueName, { connection: redisOptions() });
    const events = await openQueueEvents(queueName);
    queues.push(queue);
    queueEvents.push(events);
    await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
    const env = {
      QUEUE: queueName,
      PREFIX: prefix,
      PROBE: probe,
      MODE: 'charge',
      STORE: 'postgres',
      TRANSACTIONAL: '1',
      IDEM_TABLE: idemTable,
      CHARGES_TABLE: t.charges,
      PROVIDER_CHARGES_TABLE: t.providerCharges,
      PROVIDER_CALLS_TABLE: t.providerCalls,
      LEASE: '1000',
    };
    const worker = async (over: Record<string, string>): Promise<Fixture> => {
      const fixture = spawnFixture('idempotency-worker', { ...env, ...over });
      fixtures.push(fixture);
      await fixture.waitFor((m) => m.ready === true);
      return fixture;
    };
    const rows = async <T extends Record<string, unknown>>(sql: string): Promise<T[]> =>
      (await pool.query<T>(sql)).rows;
    const recorded = async (): Promise<RecordedEvent[]> =>
      (await redis.lrange(`${probe}:events`, 0, -1)).map((line) => JSON.parse(line) as RecordedEvent);
    return {
      queue,
      events,
      probe,
      scope: `${queueName}:${JOB}`,
      worker,
      recorded,
      charges: () =>
        rows<{ id: string; order_id: number; provider_charge_id: string; job_id: string; worker: string }>(
          `SELECT id::text, order_id, provider_charge_id, job_id, worker FROM ${t.charges} ORDER BY id`,
        ),
      providerCharges: () =>
        rows<{ id: string; idempotency_key: string; customer_id: string; amount_cents: number }>(
          `SELECT id::text, idempotency_key, customer_id, amount_cents FROM ${t.providerCharges} ORDER BY id`,
        ),
      providerCalls: () =>
        rows<{ idempotency_key: string; worker: string }>(
          `SELECT idempotency_key, worker FROM ${t.providerCalls} ORDER BY id`,
        ),
    };
  }

  beforeAll(async () => {
    await store.migrate();
  });

  afterEach(async () => {
    await leftovers.cleanUp();
  });

  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${idemTable}`);
    await pool.end();
    await redis.quit();
    await blocking.quit();
  });

  it('delivered twice "33 s apart" (scaled: the second 33 ms after the first completed): one charge, the second delivery replays its charge id', async () => {
    const s = await scenario('apart');
    await s.worker({ LABEL: 'W', CONCURRENCY: '2' });

    const first = await s.queue.add(JOB, ORDER);
    const charged = (await first.waitUntilFinished(s.events, 30_000)) as ChargeResult;
    expect(charged).toMatchObject({ orderId: 48213, jobId: first.id, worker: 'W', takeover: false });

    const second = await s.queue.add(JOB, ORDER, { delay: 33 });
    expect(second.id).not.toBe(first.id); // a re-delivery is a new job
    expect(await second.waitUntilFinished(s.events, 30_000)).toEqual(charged);
    const processed = await s.queue.getJob(second.id!);
    expect(processed!.processedOn! - processed!.timestamp).toBeGreaterThanOrEqual(33);

    expect(await s.charges()).toEqual([
      {
        id: charged.chargeId,
        order_id: 48213,
        provider_charge_id: charged.providerChargeId,
        job_id: first.id,
        worker: 'W',
      },
    ]);
    expect(await s.providerCharges()).toEqual([
      {
        id: charged.providerChargeId,
        idempotency_key: charged.providerKey,
        customer_id: 'cus_4821',
        amount_cents: 12_900,
      },
    ]);
    // the second delivery never reached the provider
    expect(await s.providerCalls()).toEqual([{ idempotency_key: charged.providerKey, worker: 'W' }]);
    const replayed = await waitFor('the replay to be recorded', async () =>
      (await s.recorded()).find((e) => e.type === 'idempotencyReplayed'),
    );
    expect(replayed).toMatchObject({ jobId: second.id, key: '48213', scope: s.scope, state: 'completed' });
  }, 45_000);

  it('delivered twice in parallel to two processes: one charge, one provider call, both jobs return it', async () => {
    const s = await scenario('parallel');
    // One slot per process, and a run waits at the gate after charging: while one process holds the order, the other
    // delivery can only be taken by the other process.
    await Promise.all([
      s.worker({ LABEL: 'P', CONCURRENCY: '1', HOLD: 'gate' }),
      s.worker({ LABEL: 'Q', CONCURRENCY: '1', HOLD: 'gate' }),
    ]);

    const [j1, j2] = await s.queue.addBulk([
      { name: JOB, data: ORDER },
      { name: JOB, data: ORDER },
    ]);
    const popped = await blocking.blpop(`${s.probe}:held`, 20);
    expect(popped).not.toBeNull();
    const held = JSON.parse(popped![1]) as HeldRun;
    const [holder, other] = held.jobId === j1.id ? [j1, j2] : [j2, j1];
    expect(held).toMatchObject({ jobId: holder.id, key: '48213', takeover: false });

    // The other delivery, in the other process, meets the holder's claim, which is not committed before the charge
    // is: it is told the order is in progress (by a holder it cannot name) and moved back to delayed, not run, not
    // failed, never waiting on a lock in PostgreSQL.
    const delayed = await waitFor('the other delivery to meet the claim', async () =>
      (await s.recorded()).find((e) => e.type === 'idempotencyInProgress' && e.jobId === other.id),
    );
    expect(delayed).toMatchObject({ action: 'delayed' });
    expect(delayed.holderJobId).toBeUndefined();
    expect(delayed.worker).not.toBe(held.worker);
    expect(await s.queue.getJobState(other.id!)).toBe('delayed');

    await redis.rpush(`${s.probe}:gate`, 'go');
    const charged = (await holder.waitUntilFinished(s.events, 30_000)) as ChargeResult;
    expect(charged).toMatchObject({ jobId: holder.id, worker: held.worker, takeover: false });
    expect(await other.waitUntilFinished(s.events, 30_000)).toEqual(charged);

    expect(await s.charges()).toEqual([
      {
        id: charged.chargeId,
        order_id: 48213,
        provider_charge_id: charged.providerChargeId,
        job_id: holder.id,
        worker: held.worker,
      },
    ]);
    expect((await s.providerCharges()).map((c) => c.id)).toEqual([charged.providerChargeId]);
    expect(await s.providerCalls()).toEqual([{ idempotency_key: charged.providerKey, worker: held.worker }]);
  }, 45_000);

  it('a worker killed after the charge but before completion: the restarted worker takes over; one local charge, one provider charge, two provider calls with one key', async () => {
    const s = await scenario('killed');
    // A's job lock lasts 1 s and the restarted worker looks for stalled jobs every 300 ms, so the job comes back in
    // about a second; the restarted worker holds its own lock longer, so a loaded machine never makes it stall too.
    const timing = { CONCURRENCY: '1', LOCK_DURATION: '1000', STALLED_INTERVAL: '300' };
    const a = await s.worker({ ...timing, LABEL: 'A', HOLD: 'hang' });

    const job = await s.queue.add(JOB, ORDER);
    const held = (await a.waitFor((m) => 'held' in m)).held as HeldRun;
    expect(held).toEqual({ worker: 'A', jobId: job.id, key: '48213', takeover: false });
    // The provider charged (outside our transaction); our charge row is written but not committed.
    const [providerCharge] = await s.providerCharges();
    expect(await s.providerCalls()).toEqual([{ idempotency_key: providerCharge.idempotency_key, worker: 'A' }]);
    expect(await s.charges()).toEqual([]);

    a.child.kill('SIGKILL');
    expect(await a.exited).toMatchObject({ signal: 'SIGKILL' });
    await s.worker({ ...timing, LABEL: 'restarted', LOCK_DURATION: '10000' });

    // BullMQ recovers the stalled job; A's claim rolled back with its transaction, so the restarted worker claims the
    // order afresh, told of the stall BullMQ counted as a takeover.
    const charged = (await job.waitUntilFinished(s.events, 30_000)) as ChargeResult;
    expect(charged).toMatchObject({
      orderId: 48213,
      jobId: job.id,
      worker: 'restarted',
      takeover: true,
      providerChargeId: providerCharge.id,
      providerKey: providerCharge.idempotency_key,
    });
    // the downstream key is derived, free of the raw order data
    expect(charged.providerKey).toMatch(/^uj_[A-Za-z0-9_-]+$/);
    expect(charged.providerKey).not.toContain('48213');

    // Exactly one local charge: A's row was rolled back with its transaction.
    expect(await s.charges()).toEqual([
      {
        id: charged.chargeId,
        order_id: 48213,
        provider_charge_id: providerCharge.id,
        job_id: job.id,
        worker: 'restarted',
      },
    ]);
    // Exactly one provider charge, though the provider was called twice with the same Idempotency-Key.
    expect(await s.providerCharges()).toEqual([providerCharge]);
    expect(await s.providerCalls()).toEqual([
      { idempotency_key: charged.providerKey, worker: 'A' },
      { idempotency_key: charged.providerKey, worker: 'restarted' },
    ]);

    const record = await store.get(s.scope, '48213');
    expect(record).toMatchObject({ state: 'completed', attempts: 1, jobId: job.id });
    expect(JSON.parse(record!.result!)).toEqual(charged);
    // The restarted worker's claim event is recorded by a write of its own, which may land after the job completed.
    const claims = await waitFor("the restarted worker's claim to be recorded", async () => {
      const found = (await s.recorded()).filter((e) => e.type === 'idempotencyClaimed');
      return found.some((e) => e.worker === 'restarted') && found;
    });
    expect(claims.map(({ worker, takeover }) => ({ worker, takeover }))).toEqual([
      { worker: 'A', takeover: false },
      { worker: 'restarted', takeover: true },
    ]);
  }, 45_000);
});
