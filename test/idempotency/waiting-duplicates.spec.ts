// A delivery that meets its key in progress elsewhere waits in delayed, and runs the moment the holder settles the
// record (completed, failed or released), not when the holder's lease could have ended: the holder promotes it. Here
// the lease is ten minutes, so a duplicate that waited for it would never finish within the test.
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { IdempotencyJob } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';

const LONG_LEASE = 10 * 60_000;

interface Charge {
  orderId: string;
  tag: string;
  fail?: boolean;
}

const byOrder = (job: IdempotencyJob<Charge>) => job.data.orderId;

describe('deliveries waiting for a key in progress', () => {
  const { start } = useApps('wake');

  /** Waits until `job` was moved to delayed because its key is in progress. */
  const delayed = (events: EventLog, job: Job) =>
    events.next((event) => event.type === 'idempotencyInProgress' && event.jobId === job.id);

  async function boot(gates: Gates, concurrency = 4): Promise<{ app: TestApp; events: EventLog }> {
    let effects = 0;
    const app = await start({
      idempotency: { key: byOrder, lease: LONG_LEASE, fingerprint: false },
      worker: { concurrency },
      handler: async (job: Job) => {
        const data = job.data as Charge;
        await gates.handler(job);
        if (data.fail && job.attemptsMade === 0) throw new Error('declined');
        effects++;
        return { effects, by: data.tag };
      },
    });
    return { app, events: new EventLog(app) };
  }

  it('run as soon as the holder completes: each replays the stored result, the effect runs once', async () => {
    const gates = new Gates().hold('holder');
    const { app, events } = await boot(gates);
    const holder = await app.queue.add('charge', { orderId: 'o-1', tag: 'holder' });
    await gates.started('holder');
    const waiting = await Promise.all(['a', 'b', 'c'].map((tag) => app.queue.add('charge', { orderId: 'o-1', tag })));
    await Promise.all(waiting.map((job) => delayed(events, job)));
    for (const job of waiting) expect(await app.queue.getJobState(job.id!)).toBe('delayed');

    gates.release('holder');
    await expect(app.finished(holder)).resolves.toEqual({ effects: 1, by: 'holder' });
    for (const job of waiting) await expect(app.finished(job)).resolves.toEqual({ effects: 1, by: 'holder' });
    expect(app.runs.map((job) => (job.data as Charge).tag)).toEqual(['holder']);
  });

  it('run as soon as the holder fails and releases the key: one of them claims it and makes the effect', async () => {
    const gates = new Gates().hold('holder');
    const { app, events } = await boot(gates);
    const holder = await app.queue.add('charge', { orderId: 'o-2', tag: 'holder', fail: true });
    await gates.started('holder');
    const waiting = await app.queue.add('charge', { orderId: 'o-2', tag: 'waiting' });
    await delayed(events, waiting);

    gates.release('holder');
    await expect(app.finished(holder)).rejects.toThrow('declined');
    await expect(app.finished(waiting)).resolves.toEqual({ effects: 1, by: 'waiting' });
  });

  it('a holder in another application (another subscriber) wakes them too', async () => {
    const gates = new Gates().hold('holder');
    // Concurrency 1: while its job holds the key, the first app's worker takes no other job.
    const { app: holderApp } = await boot(gates, 1);
    const holder = await holderApp.queue.add('charge', { orderId: 'o-3', tag: 'holder' });
    await gates.started('holder');
    // A second application on the same queue and prefix (another subscriber) takes the duplicate.
    const { app: other, events } = await bootOn(holderApp, gates);
    const waiting = await other.queue.add('charge', { orderId: 'o-3', tag: 'waiting' });
    await delayed(events, waiting);

    gates.release('holder');
    await expect(holderApp.finished(holder)).resolves.toEqual({ effects: 1, by: 'holder' });
    await expect(other.finished(waiting)).resolves.toMatchObject({ by: 'holder' });
  });

  async function bootOn(first: TestApp, gates: Gates): Promise<{ app: TestApp; events: EventLog }> {
    const app = await start({
      queue: first.queue.name,
      module: { prefix: first.prefix },
      idempotency: { key: byOrder, lease: LONG_LEASE, fingerprint: false },
      worker: { concurrency: 4 },
      handler: gates.handler,
    });
    return { app, events: new EventLog(app) };
  }
});
