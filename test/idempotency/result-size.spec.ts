// maxResultBytes: an idempotency record keeps the handler's result only up to a size (UTF-8 bytes of its JSON). A
// larger result completes the record without it, with a warning; duplicates replay `undefined`; the effect runs once.
// The job's own return value is BullMQ's and keeps the whole result.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { RedisIdempotencyStore, type IdempotencyJob, type IdempotencyStore } from '../../lib/index.js';
import { workerOf } from '../conflicts/helpers.js';
import { useApps } from '../support/apps.js';
import { captureLogger } from '../support/events.js';
import { Outcomes } from '../support/outcomes.js';
import { stepStore, type StepStore } from '../support/step-stores.js';

interface Order {
  orderId: string;
  text: string;
}

const byOrder = (job: IdempotencyJob<Order>) => job.data.orderId;

/** The handler's result for an order: its text, whose JSON is `{"text":"…"}` (11 bytes around it). */
const resultOf = (job: Job<Order>) => ({ text: job.data.text });

describe('maxResultBytes (Redis store)', () => {
  const { redis, start } = useApps('idem-size');

  async function boot(maxResultBytes?: number) {
    const captured = captureLogger();
    let effects = 0;
    const app = await start({
      module: { logger: captured.logger },
      idempotency: { key: byOrder, ...(maxResultBytes === undefined ? {} : { maxResultBytes }) },
      handler: async (job: Job<Order>) => {
        effects++;
        return resultOf(job);
      },
    });
    const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
    return { app, store, warnings: captured.lines.warn, effects: () => effects, scope: `${app.queue.name}:charge` };
  }

  it('a result over the bound in UTF-8 bytes (not in characters) completes the record without it', async () => {
    const { app, store, warnings, effects, scope } = await boot(1024);
    const outcomes = new Outcomes(workerOf(app));
    // 500 characters, 1,000 bytes of UTF-8: its JSON is 511 characters and 1,011 bytes.
    const fits = { orderId: 'fits', text: 'é'.repeat(500) };
    // 507 characters, 1,014 bytes: JSON 518 characters (under 1024), 1,025 bytes (over).
    const over = { orderId: 'over', text: 'é'.repeat(507) };

    const kept = await app.queue.add('charge', fits);
    await expect(app.finished(kept)).resolves.toEqual({ text: fits.text });
    expect(JSON.parse((await store.get(scope, 'fits'))!.result!)).toEqual({ text: fits.text });

    const first = await app.queue.add('charge', over);
    await expect(app.finished(first)).resolves.toEqual({ text: over.text }); // BullMQ's return value: whole
    const record = await store.get(scope, 'over');
    expect(record).toMatchObject({ state: 'completed', jobId: first.id });
    expect(record!.result).toBeUndefined();
    expect(warnings).toEqual([
      expect.stringContaining(
        `Job ${first.id}'s result (1025 bytes of JSON) is larger than maxResultBytes (1024): idempotency key "over"`,
      ),
    ]);

    const duplicate = await app.queue.add('charge', over);
    await expect(outcomes.completed(duplicate.id!)).resolves.toBeUndefined(); // replayed: nothing kept to replay
    expect(effects()).toBe(2); // fits, over: the duplicate did not run
    expect(app.runs.map((job) => job.id)).toEqual([kept.id, first.id]);

    // Three bytes a character (one UTF-16 unit each, the most a unit takes): 338 of them, JSON 349 characters (over a
    // third of the bound: too long to be kept without counting its bytes) and 1,025 bytes (over).
    const wide = await app.queue.add('charge', { orderId: 'wide', text: '€'.repeat(338) });
    await app.finished(wide);
    expect((await store.get(scope, 'wide'))!.result).toBeUndefined();
    expect(warnings.at(-1)).toContain(
      `Job ${wide.id}'s result (1025 bytes of JSON) is larger than maxResultBytes (1024)`,
    );
  });

  it('0 keeps no result, without a warning; the default keeps one of a megabyte', async () => {
    const none = await boot(0);
    const job = await none.app.queue.add('charge', { orderId: 'a', text: '' });
    await expect(none.app.finished(job)).resolves.toEqual({ text: '' });
    expect((await none.store.get(none.scope, 'a'))!.result).toBeUndefined();
    expect(none.warnings).toEqual([]); // chosen: no warning for each job

    const standard = await boot();
    const text = 'x'.repeat(1024 * 1024 - 11); // JSON of exactly 1 MiB
    const big = await standard.app.queue.add('charge', { orderId: 'b', text });
    await standard.app.finished(big);
    expect((await standard.store.get(standard.scope, 'b'))!.result!.length).toBe(1024 * 1024);
    const bigger = await standard.app.queue.add('charge', { orderId: 'c', text: `${text}y` });
    await standard.app.finished(bigger);
    expect((await standard.store.get(standard.scope, 'c'))!.result).toBeUndefined();
    expect(standard.warnings).toEqual([
      expect.stringContaining('(1048577 bytes of JSON) is larger than maxResultBytes (1048576)'),
    ]);
  });
});

describe('maxResultBytes (PostgreSQL, transactional)', () => {
  const { start } = useApps('idem-size-pg');
  let sql: StepStore;
  let store: IdempotencyStore;

  beforeAll(async () => {
    sql = await stepStore('postgres');
    store = sql.store;
  });
  afterAll(async () => sql.close());

  it('the effect and the record commit together; the record keeps no result over the bound', async () => {
    const captured = captureLogger();
    const app = await start({
      module: { logger: captured.logger, idempotency: { stores: { sql: store } } },
      idempotency: { key: byOrder, store: 'sql', transactional: true, maxResultBytes: 100 },
      handler: async (job: Job<Order>) => {
        await sql.write(job, `charged ${job.data.orderId}`);
        return resultOf(job);
      },
    });
    const outcomes = new Outcomes(workerOf(app));
    const text = 'z'.repeat(200);
    const first = await app.queue.add('charge', { orderId: 'pg', text });
    await expect(app.finished(first)).resolves.toEqual({ text });
    expect(await store.get(`${app.queue.name}:charge`, 'pg')).toMatchObject({ state: 'completed', result: undefined });
    expect(captured.lines.warn).toEqual([
      expect.stringContaining('(211 bytes of JSON) is larger than maxResultBytes (100)'),
    ]);
    const duplicate = await app.queue.add('charge', { orderId: 'pg', text });
    await expect(outcomes.completed(duplicate.id!)).resolves.toBeUndefined();
    expect(await sql.written()).toEqual(['charged pg']);
  });
});
