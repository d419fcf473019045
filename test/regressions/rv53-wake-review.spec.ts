// Review of session 53 (deliveries waiting for a parked record woken when it is settled, regressions/parked-record-wake):
// - the orphan reaper's PUBLISH of the settle, refused (a Redis user granted no channel: docs/operations.md says that
//   costs a warning, never a delivery), failed the release it followed: the record was released and its mark deleted,
//   but the run counted the key in `failedKeys` (with NOPERM as `firstFailure`) and not in `reaped`;
// - the settle's announcement, refused, was logged once per settle (an announcement of a waiting delivery: once a
//   minute);
// - a delivery delayed for a key whose claim then threw (the store away a moment) stayed remembered as waiting for it,
//   and the settle's wake promoted it out of the retry backoff BullMQ gave it (`answered` says it must not).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue, type Job } from 'bullmq';
import { UniqueJobsReaper, type IdempotencyStore } from '../../lib/index.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { captureLogger, EventLog } from '../support/events.js';
import { ownRedisForFile } from '../support/own-redis.js';
import { HOUR_MS, parkingOptions, parkThenRemove } from '../support/parking-app.js';
import { bullOptions } from '../support/redis.js';
import { stepStore, type StepStore } from '../support/step-stores.js';
import { waitFor } from '../support/wait.js';

// ACL users are a server setting: this file gets a server of its own.
const server = await ownRedisForFile();
const LEASE_MS = 60_000;

/** Starts an app whose connections log in as a user granted every key and command but no pub/sub channel. */
async function startWithoutChannels(
  start: (options?: Partial<TestAppOptions>) => Promise<TestApp>,
  options: Partial<TestAppOptions>,
): Promise<TestApp> {
  await server.admin.call('ACL', 'SETUSER', 'nochan53', 'reset', 'on', '>pw', '~*', 'resetchannels', '+@all');
  process.env.REDIS_URL = server.url.replace('redis://', 'redis://nochan53:pw@');
  try {
    return await start(options);
  } finally {
    process.env.REDIS_URL = server.url;
  }
}

describe('a parked record settled by a Redis user granted no channel', () => {
  const { start } = useApps('rv53-nochan');

  it('the orphan reaper counts the parked record it released as reaped, not as a failed key', async () => {
    const ran: string[] = [];
    const { logger } = captureLogger();
    const options = parkingOptions(undefined, ran, {
      idempotency: { lease: LEASE_MS },
      module: { reaper: { interval: false, grace: 0 }, logger },
    });
    const app = await startWithoutChannels(start, options);
    await parkThenRemove(app, 'k');
    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    expect(report.firstFailure).toBeUndefined();
    expect(report.failedKeys).toBe(0);
    expect(report.reaped.idempotencyClaims).toBe(1);
  }, 30_000);

  it('the refused settle announcements are said once, not once per settle', async () => {
    const ran: string[] = [];
    const { logger, lines } = captureLogger();
    const options = parkingOptions(undefined, ran, { idempotency: { lease: LEASE_MS }, module: { logger } });
    const app = await startWithoutChannels(start, options);
    for (const key of ['k1', 'k2', 'k3']) {
      await parkThenRemove(app, key);
      // Finds the record parked for a job that is gone: settles it (and announces that), then claims it.
      await expect(app.finished(await app.queue.add('charge', { key }))).resolves.toBe('fresh');
    }
    expect(lines.warn.filter((line) => /could not announce it settled/.test(line))).toHaveLength(1);
  }, 30_000);
});

describe('a delivery whose claim failed after it waited for the key (sqlite store)', () => {
  const { start, onCleanup } = useApps('rv53-backoff');
  let sql: StepStore;
  beforeAll(async () => {
    sql = await stepStore('sqlite');
  });
  afterAll(async () => sql?.close());

  it('keeps the retry backoff BullMQ gave it when the parked record is settled', async () => {
    const ran: string[] = [];
    let failClaims = 0;
    // The store away for one claim: the next claim throws.
    const store = new Proxy(sql.store, {
      get(target, property) {
        if (property === 'claim') {
          return (request: Parameters<IdempotencyStore['claim']>[0]) => {
            if (failClaims > 0) {
              failClaims--;
              return Promise.reject(new Error('store away a moment'));
            }
            return target.claim(request);
          };
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const app = await start(parkingOptions({ ...sql, store }, ran, { idempotency: { lease: LEASE_MS } }));
    const events = new EventLog(app);
    const first = await app.queue.add('charge', { key: 'k', steps: true });
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const waiting = await waitingDuplicate(app, events, 'k');
    const retried = await waitingDuplicate(app, events, 'k', {
      attempts: 2,
      backoff: { type: 'fixed', delay: HOUR_MS },
    });
    // Promoted (as a holder's process promotes the deliveries that waited for it); its claim throws: BullMQ retries it
    // an hour later.
    failClaims = 1;
    await (await app.queue.getJob(retried.id!))!.promote();
    await waitFor('the failed attempt backed off', async () => {
      const job = await app.queue.getJob(retried.id!);
      return job?.attemptsMade === 1 && (await job.getState()) === 'delayed';
    });
    const plain = new Queue(app.queue.name, bullOptions());
    onCleanup(() => plain.close());
    await (await plain.getJob(first.id!))!.remove();
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // past what a later holder adopts (PENDING_MS)
    const later = await app.queue.add('charge', { key: 'k' });
    await expect(app.finished(later)).resolves.toBe('fresh');
    await expect(app.finished(waiting)).resolves.toBe('fresh');
    // The woken deliveries ran; the one in its backoff did not (it would replay at once: promoted, it completes).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await (await app.queue.getJob(retried.id!))!.getState()).toBe('delayed');
  }, 30_000);
});

/** Adds a duplicate of key `key` to `app` and resolves it once it met the parked record and waits (delayed). */
async function waitingDuplicate(app: TestApp, events: EventLog, key: string, opts: object = {}): Promise<Job> {
  const waiting = await app.queue.add('charge', { key }, opts);
  await events.next((e) => e.type === 'idempotencyInProgress' && e.jobId === waiting.id && e.action === 'delayed');
  expect(await (await app.queue.getJob(waiting.id!))!.getState()).toBe('delayed');
  return waiting;
}
