// @IdempotencyKey end to end: real Redis, real BullMQ workers, the default Redis store. Each test asserts what a user
// can observe: how often the handler's effect ran, the jobs' return values, states and attempts, the records in the
// store, the Redis keys, and the events.
import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { UnrecoverableError, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import {
  currentIdempotency,
  idempotencyOf,
  IdempotencyInProgressError,
  IdempotencyKeyFailedError,
  IdempotencyKeyMismatchError,
  MissingIdempotencyKeyError,
  RedisIdempotencyStore,
  UniqueJobsError,
  UnserializableIdempotencyResultError,
  type IdempotencyJob,
  type IdempotencyRecord,
} from '../../lib/index.js';
import { describeEvent } from '../../lib/events/event-logger.js';
import { workerOf } from '../conflicts/helpers.js';
import type { TestApp, TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { captureLogger, EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { Outcomes } from '../support/outcomes.js';
import { prefixKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

interface Order {
  orderId: string;
  amount: number;
  note?: string;
}

const byOrder = (job: IdempotencyJob<Order>) => job.data.orderId;

const sha256Key = (key: string) => `sha256:${createHash('sha256').update(key).digest('hex')}`;

/** A TCP port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

/** Runs `fn` and answers what it threw. */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('@IdempotencyKey (Redis store)', () => {
  const { redis, start, keysOf, onCleanup } = useApps('idem');

  /** An app with the file's defaults, its event log, the worker's outcomes, and a reader of its store. */
  async function boot(options: Partial<TestAppOptions>) {
    const app = await start(options);
    return {
      app,
      events: new EventLog(app),
      outcomes: new Outcomes(workerOf(app)),
      store: new RedisIdempotencyStore({ client: redis, prefix: app.prefix }),
      scope: (jobName: string) => `${app.queue.name}:${jobName}`,
    };
  }

  const jobOf = async (app: TestApp, job: Job) => (await app.queue.getJob(job.id!))!;

  describe('replay', () => {
    it('the first delivery runs; a second job with the same key completes with the stored value, handler not called', async () => {
      let effects = 0;
      const result = {
        charge: { id: 'ch_1', amount: { value: 1250, currency: 'EUR' }, lines: [{ sku: 'a', qty: 2 }, { sku: 'b' }] },
        captured: true,
        voided: null,
        tags: ['x', 'y'],
      };
      const { app, events, outcomes, store, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async () => {
          effects++;
          return structuredClone(result);
        },
      });
      const data: Order = { orderId: 'o-1', amount: 1250 };

      const first = await app.queue.add('charge', data);
      expect(await app.finished(first)).toEqual(result);
      const second = await app.queue.add('charge', data);
      expect(second.id).not.toBe(first.id);
      expect(await app.finished(second)).toEqual(result);
      expect(await outcomes.completed(second.id!)).toEqual(result);
      expect((await jobOf(app, second)).returnvalue).toEqual(result);

      expect(effects).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      const ids = { queue: app.queue.name, jobName: 'charge', scope: scope('charge'), key: 'o-1', store: 'redis' };
      expect(events.of('idempotencyClaimed')).toEqual([
        expect.objectContaining({ ...ids, jobId: first.id, takeover: false }),
      ]);
      expect(events.of('idempotencyCompleted')).toEqual([expect.objectContaining({ ...ids, jobId: first.id })]);
      expect(events.of('idempotencyReplayed')).toEqual([
        expect.objectContaining({ ...ids, jobId: second.id, state: 'completed' }),
      ]);
      const record = await store.get(scope('charge'), 'o-1');
      expect(record).toMatchObject({ state: 'completed', jobId: first.id, key: 'o-1', attempts: 1 });
      expect(JSON.parse(record!.result!)).toEqual(result);
    });

    it.each<[string, unknown]>([
      ['undefined', undefined],
      ['null', null],
      ['0', 0],
      ['an empty string', ''],
      ['false', false],
    ])('a handler returning %s is replayed as exactly that', async (_label, value) => {
      let effects = 0;
      const { app, outcomes, store, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async () => {
          effects++;
          return value;
        },
      });
      const data: Order = { orderId: 'o-falsy', amount: 1 };
      const first = await app.queue.add('charge', data);
      expect(await outcomes.completed(first.id!)).toBe(value);
      const record = await store.get(scope('charge'), 'o-falsy');
      expect(record?.state).toBe('completed');
      expect(record?.result).toBe(value === undefined ? undefined : JSON.stringify(value));

      const second = await app.queue.add('charge', data);
      expect(await outcomes.completed(second.id!)).toBe(value);
      await app.finished(second);
      expect(effects).toBe(1);
    });

    it('the key is read once, before the handler: a handler that mutates job.data does not move its record', async () => {
      const { app, store, scope } = await boot({
        idempotency: { key: byOrder, fingerprint: false },
        handler: async (job) => {
          (job.data as Order).orderId = 'moved';
          return 'done';
        },
      });
      await app.finished(await app.queue.add('charge', { orderId: 'o-read-once', amount: 1 }));
      expect(await store.get(scope('charge'), 'o-read-once')).toMatchObject({ state: 'completed' });
      expect(await store.get(scope('charge'), 'moved')).toBeUndefined();
    });
  });

  describe('a key in progress elsewhere', () => {
    it("'delay' (default): the duplicate goes back to delayed without using an attempt, never runs alongside, then replays", async () => {
      const gate = hold();
      const started = hold();
      let effects = 0;
      let active = 0;
      let maxActive = 0;
      const { logger, lines } = captureLogger();
      const { app, events, outcomes, store, scope } = await boot({
        idempotency: { key: byOrder, lease: 500 },
        module: { logger },
        worker: { concurrency: 2 },
        handler: async () => {
          active++;
          maxActive = Math.max(maxActive, active);
          try {
            effects++;
            if (effects === 1) {
              started.resolve();
              await gate.promise;
            }
            return { charged: 1250 };
          } finally {
            active--;
          }
        },
      });
      const data: Order = { orderId: 'o-2', amount: 1250 };
      const first = await app.queue.add('charge', data);
      await started.promise;
      const second = await app.queue.add('charge', data);
      const waits = (n: number) =>
        events.next(() => events.of('idempotencyInProgress').filter((event) => event.jobId === second.id).length >= n);

      await waits(1);
      // Delayed, never failed; it comes back about every half second while the holder runs, so poll for the state.
      await waitFor('the duplicate to be delayed', async () => (await app.queue.getJobState(second.id!)) === 'delayed');
      expect((await jobOf(app, second)).attemptsMade).toBe(0);
      const [wait] = events.of('idempotencyInProgress');
      expect(wait).toMatchObject({ action: 'delayed', jobId: second.id, holderJobId: first.id, key: 'o-2' });
      expect(wait.retryInMs).toBeLessThanOrEqual(500 + 50);

      // Three waits of up to ~550 ms each: well past the 500 ms lease, which the holder keeps renewing.
      await waits(3);
      const record = await store.get(scope('charge'), 'o-2');
      expect(record).toMatchObject({ state: 'in_progress', jobId: first.id, attempts: 1 });
      expect(record!.expiresAt - record!.createdAt).toBeGreaterThan(500);
      const waiting = await jobOf(app, second);
      expect(waiting.attemptsMade).toBe(0);
      expect(waiting.attemptsStarted).toBeGreaterThanOrEqual(3);
      expect(outcomes.errors(second.id!)).toEqual([]);
      expect(events.of('idempotencyClaimed')).toEqual([expect.objectContaining({ jobId: first.id, takeover: false })]);
      expect(events.of('idempotencyLeaseLost')).toEqual([]);
      expect(effects).toBe(1);

      gate.resolve();
      expect(await app.finished(first)).toEqual({ charged: 1250 });
      expect(await app.finished(second)).toEqual({ charged: 1250 });
      expect(effects).toBe(1);
      expect(maxActive).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(events.of('idempotencyReplayed')).toEqual([
        expect.objectContaining({ jobId: second.id, state: 'completed' }),
      ]);
      // One line for the duplicate, its outcome; none for each of its waits (a line each before).
      expect(lines.log).toEqual([
        expect.stringMatching(new RegExp(`^Job ${second.id} .*replayed the completed result`)),
      ]);
    });

    it("'fail': the duplicate's attempt fails with IdempotencyInProgressError and BullMQ's retry decides", async () => {
      const gate = hold();
      const started = hold();
      let effects = 0;
      const { app, events, outcomes, scope } = await boot({
        idempotency: { key: byOrder, onInProgress: 'fail' },
        worker: { concurrency: 3 },
        handler: async () => {
          effects++;
          if (effects === 1) {
            started.resolve();
            await gate.promise;
          }
          return 'charged';
        },
      });
      const data: Order = { orderId: 'o-3', amount: 5 };
      const first = await app.queue.add('charge', data);
      await started.promise;

      // No attempts left: the job fails.
      const once = await app.queue.add('charge', data, { attempts: 1 });
      const [error] = await outcomes.failures(once.id!);
      expect(error).toBeInstanceOf(IdempotencyInProgressError);
      expect(error).toBeInstanceOf(UniqueJobsError);
      expect(error).not.toBeInstanceOf(UnrecoverableError);
      expect(error).toMatchObject({ scope: scope('charge'), key: 'o-3', holderJobId: first.id });
      await expect(app.finished(once)).rejects.toThrow(/"o-3".* is in progress in job/);
      expect(await app.queue.getJobState(once.id!)).toBe('failed');
      expect((await jobOf(app, once)).attemptsMade).toBe(1);

      // Attempts left: retried, and once the holder is done it replays.
      const retried = await app.queue.add('charge', data, { attempts: 50, backoff: { type: 'fixed', delay: 100 } });
      await outcomes.failures(retried.id!);
      expect((await jobOf(app, retried)).attemptsMade).toBeGreaterThanOrEqual(1);
      expect(events.of('idempotencyInProgress').filter((event) => event.jobId === retried.id)).not.toEqual([]);
      expect(
        events
          .of('idempotencyInProgress')
          .every((event) => event.action === 'failed' && event.holderJobId === first.id),
      ).toBe(true);

      gate.resolve();
      expect(await app.finished(first)).toBe('charged');
      expect(await app.finished(retried)).toBe('charged');
      expect(effects).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(events.of('idempotencyReplayed')).toEqual([expect.objectContaining({ jobId: retried.id })]);
    });

    it('a holder that stopped renewing (crashed) is taken over once its lease ended: takeover in the context', async () => {
      const takeovers: boolean[] = [];
      const { app, events, store, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async (job) => {
          takeovers.push(idempotencyOf(job).takeover);
          return 'recovered';
        },
      });
      // A worker claimed the key and died: nobody renews its 1 s lease. (The Redis store keeps an expired claim a
      // while longer, which is how the next claim knows it is a takeover.)
      const crashed = { scope: scope('charge'), key: 'o-crash', owner: 'crashed-worker' };
      expect(await store.claim({ ...crashed, leaseMs: 1_000, fingerprint: undefined, jobId: 'ghost' })).toMatchObject({
        claimed: true,
        takeover: false,
      });

      const job = await app.queue.add('charge', { orderId: 'o-crash', amount: 1 });
      expect(await app.finished(job)).toBe('recovered');
      expect(takeovers).toEqual([true]);
      expect(events.of('idempotencyInProgress')).toEqual([
        expect.objectContaining({ jobId: job.id, action: 'delayed', holderJobId: 'ghost' }),
      ]);
      expect(events.of('idempotencyClaimed')).toEqual([expect.objectContaining({ jobId: job.id, takeover: true })]);
      expect(await store.get(scope('charge'), 'o-crash')).toMatchObject({ state: 'completed', attempts: 2 });
      // The crashed holder can no longer settle the record.
      expect(await store.complete(crashed, { result: '"late"', ttlMs: 60_000 })).toBe(false);
      expect(await store.release(crashed)).toBe(false);
    });

    it('a holder whose claim was taken over cannot complete the new holder record (compare-and-set)', async () => {
      const gate = hold();
      const started = hold();
      const { logger, lines } = captureLogger();
      const { app, events, store, scope } = await boot({
        idempotency: { key: byOrder, lease: 300 },
        module: { logger },
        handler: async () => {
          started.resolve();
          await gate.promise;
          return 'late holder';
        },
      });
      const job = await app.queue.add('charge', { orderId: 'o-stolen', amount: 1 });
      await started.promise;
      // Another delivery took the key over (as after a stall longer than the lease).
      const thief = { scope: scope('charge'), key: 'o-stolen', owner: 'other-worker' };
      expect(await store.delete(thief.scope, thief.key)).toBe(true);
      expect(await store.claim({ ...thief, leaseMs: 60_000, fingerprint: undefined, jobId: 'other' })).toMatchObject({
        claimed: true,
      });
      await events.next((event) => event.type === 'idempotencyLeaseLost' && event.jobId === job.id);

      gate.resolve();
      expect(await app.finished(job)).toBe('late holder');
      expect(await store.get(thief.scope, thief.key)).toMatchObject({
        state: 'in_progress',
        owner: 'other-worker',
        jobId: 'other',
      });
      expect(events.of('idempotencyCompleted')).toEqual([]);
      expect(
        lines.error.some((line) => line.includes(`Job ${job.id} lost its claim on idempotency key "o-stolen"`)),
      ).toBe(true);
    });

    it('a delivery that waited for a holder which then failed claims the key and runs itself', async () => {
      const gate = hold();
      const started = hold();
      let calls = 0;
      const { app, events } = await boot({
        idempotency: { key: byOrder, lease: 500 },
        worker: { concurrency: 2 },
        handler: async () => {
          calls++;
          if (calls === 1) {
            started.resolve();
            await gate.promise;
            throw new Error('declined by the first run');
          }
          return 'second run';
        },
      });
      const data: Order = { orderId: 'o-fails', amount: 1 };
      const first = await app.queue.add('charge', data);
      await started.promise;
      const second = await app.queue.add('charge', data);
      await events.next((event) => event.type === 'idempotencyInProgress' && event.jobId === second.id);
      gate.resolve();
      await expect(app.finished(first)).rejects.toThrow('declined by the first run');
      expect(await app.finished(second)).toBe('second run');
      expect(app.runs.map((job) => job.id)).toEqual([first.id, second.id]);
      expect(events.of('idempotencyReleased')).toEqual([expect.objectContaining({ jobId: first.id })]);
      expect(events.of('idempotencyClaimed').map((event) => [event.jobId, event.takeover])).toEqual([
        [first.id, false],
        [second.id, false],
      ]);
    });
  });

  describe('failures of the handler', () => {
    it("'release' (default): the claim is released, the retry runs again, and the successful run is recorded once", async () => {
      let effects = 0;
      const { app, events, store, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async (job) => {
          if (job.attemptsMade < 2) throw new Error(`provider timeout #${job.attemptsMade + 1}`);
          effects++;
          return { settledOnAttempt: job.attemptsMade + 1 };
        },
      });
      const data: Order = { orderId: 'o-4', amount: 9 };
      const job = await app.queue.add('charge', data, { attempts: 3 });
      expect(await app.finished(job)).toEqual({ settledOnAttempt: 3 });
      expect(app.runs.map((run) => run.id)).toEqual([job.id, job.id, job.id]);
      expect(effects).toBe(1);
      // Each retry claimed an absent record (released), not one taken over after its lease.
      expect(events.of('idempotencyClaimed').map((event) => event.takeover)).toEqual([false, false, false]);
      expect(events.of('idempotencyReleased')).toHaveLength(2);
      expect(events.of('idempotencyCompleted')).toHaveLength(1);
      const record = await store.get(scope('charge'), 'o-4');
      expect(record).toMatchObject({ state: 'completed', attempts: 1, jobId: job.id });
      expect(JSON.parse(record!.result!)).toEqual({ settledOnAttempt: 3 });

      const again = await app.queue.add('charge', data, { attempts: 3 });
      expect(await app.finished(again)).toEqual({ settledOnAttempt: 3 });
      expect(app.runs).toHaveLength(3);
      expect(effects).toBe(1);
    });

    it("'keep': a final failure is stored; a later delivery fails with IdempotencyKeyFailedError without running", async () => {
      class CardDeclinedError extends Error {
        constructor(message: string) {
          super(message);
          this.name = 'CardDeclinedError';
        }
      }
      const { app, events, outcomes, store, scope } = await boot({
        idempotency: { key: byOrder, onFailure: 'keep' },
        handler: async () => {
          throw new CardDeclinedError('insufficient funds');
        },
      });
      const data: Order = { orderId: 'o-declined', amount: 70 };
      const first = await app.queue.add('charge', data, { attempts: 1 });
      await expect(app.finished(first)).rejects.toThrow('insufficient funds');
      const record = await store.get(scope('charge'), 'o-declined');
      expect(record).toMatchObject({ state: 'failed', jobId: first.id });
      expect(JSON.parse(record!.error!)).toEqual({ name: 'CardDeclinedError', message: 'insufficient funds' });
      expect(events.of('idempotencyFailureKept')).toEqual([expect.objectContaining({ jobId: first.id })]);
      expect(events.of('idempotencyReleased')).toEqual([]);

      const later = await app.queue.add('charge', data, { attempts: 3 });
      const [error] = await outcomes.failures(later.id!);
      expect(error).toBeInstanceOf(IdempotencyKeyFailedError);
      expect(error).toBeInstanceOf(UnrecoverableError);
      expect(error).toBeInstanceOf(UniqueJobsError);
      expect(error).toMatchObject({
        key: 'o-declined',
        storedName: 'CardDeclinedError',
        storedMessage: 'insufficient funds',
      });
      await expect(app.finished(later)).rejects.toThrow(/already failed.*CardDeclinedError: insufficient funds/);
      expect(await app.queue.getJobState(later.id!)).toBe('failed');
      expect((await jobOf(app, later)).attemptsMade).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(events.of('idempotencyReplayed')).toEqual([expect.objectContaining({ jobId: later.id, state: 'failed' })]);
    });

    it("'keep': a failed attempt with retries left is released, so the retry runs again", async () => {
      let effects = 0;
      const { app, events, store, scope } = await boot({
        idempotency: { key: byOrder, onFailure: 'keep' },
        handler: async (job) => {
          if (job.attemptsMade === 0) throw new Error('transient');
          effects++;
          return 'ok';
        },
      });
      const job = await app.queue.add('charge', { orderId: 'o-keep-retry', amount: 1 }, { attempts: 2 });
      expect(await app.finished(job)).toBe('ok');
      expect(app.runs).toHaveLength(2);
      expect(effects).toBe(1);
      expect(events.of('idempotencyReleased')).toHaveLength(1);
      expect(events.of('idempotencyFailureKept')).toEqual([]);
      expect(await store.get(scope('charge'), 'o-keep-retry')).toMatchObject({ state: 'completed' });
    });

    // A null-prototype object has no string form: building its stored failure threw, the claim stayed in progress, and
    // the next delivery took it over after the lease and ran the effect again.
    it("'keep': whatever the handler throws, the failure is kept with a bounded name and message", async () => {
      const thrown: Record<string, () => unknown> = {
        plain: () => ({ name: 'CardDeclined', message: 'insufficient funds' }),
        bare: () => Object.assign(Object.create(null) as object, { code: 51 }),
        huge: () => new Error('x'.repeat(100_000)),
      };
      const { app, events, outcomes, store, scope } = await boot({
        idempotency: { key: byOrder, onFailure: 'keep' },
        handler: async (job) => {
          throw thrown[(job.data as Order).orderId]();
        },
      });
      const stored = new Map<string, { name: string; message: string }>();
      for (const orderId of Object.keys(thrown)) {
        const first = await app.queue.add('charge', { orderId, amount: 1 }, { attempts: 1 });
        await outcomes.failures(first.id!);
        const record = await store.get(scope('charge'), orderId);
        expect([orderId, record?.state]).toEqual([orderId, 'failed']);
        stored.set(orderId, JSON.parse(record!.error!) as { name: string; message: string });
        const later = await app.queue.add('charge', { orderId, amount: 1 }, { attempts: 3 });
        const [error] = await outcomes.failures(later.id!);
        expect(error).toBeInstanceOf(IdempotencyKeyFailedError);
      }
      expect(stored.get('plain')).toEqual({ name: 'CardDeclined', message: 'insufficient funds' });
      expect(stored.get('bare')).toEqual({ name: 'Error', message: 'a thrown object without a string form' });
      expect(stored.get('huge')!.message).toHaveLength(2_000);
      expect(stored.get('huge')!.message.endsWith('…')).toBe(true);
      expect(app.runs).toHaveLength(3);
      expect(events.of('idempotencyFailureKept')).toHaveLength(3);
      expect(events.of('error')).toEqual([]);
    });
  });

  describe('payload mismatch', () => {
    it('the same key with another payload fails for good with IdempotencyKeyMismatchError; nothing runs', async () => {
      const { app, events, outcomes, store, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async (job) => ({ charged: (job.data as Order).amount }),
      });
      const first = await app.queue.add('charge', { orderId: 'o-5', amount: 10 });
      expect(await app.finished(first)).toEqual({ charged: 10 });
      const stored = await store.get(scope('charge'), 'o-5');

      const other = await app.queue.add('charge', { orderId: 'o-5', amount: 20 }, { attempts: 3 });
      const [error] = await outcomes.failures(other.id!);
      expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
      expect(error).toBeInstanceOf(UniqueJobsError);
      expect(error).toBeInstanceOf(UnrecoverableError);
      const mismatch = error as IdempotencyKeyMismatchError;
      expect(mismatch).toMatchObject({ key: 'o-5', scope: scope('charge'), storedFingerprint: stored!.fingerprint });
      expect(mismatch.fingerprint).not.toBe(mismatch.storedFingerprint);
      await expect(app.finished(other)).rejects.toThrow(/"o-5".*already used with a different payload/);
      expect(await app.queue.getJobState(other.id!)).toBe('failed');
      expect((await jobOf(app, other)).attemptsMade).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(events.of('idempotencyMismatch')).toEqual([expect.objectContaining({ jobId: other.id, key: 'o-5' })]);
      expect(await store.get(scope('charge'), 'o-5')).toEqual(stored);
    });

    it('a mismatch is refused while the first delivery is still in progress, too', async () => {
      const gate = hold();
      const started = hold();
      const { app, outcomes } = await boot({
        idempotency: { key: byOrder },
        worker: { concurrency: 2 },
        handler: async () => {
          started.resolve();
          await gate.promise;
          return 'ran';
        },
      });
      const first = await app.queue.add('charge', { orderId: 'o-5b', amount: 10 });
      await started.promise;
      const other = await app.queue.add('charge', { orderId: 'o-5b', amount: 11 }, { attempts: 3 });
      expect((await outcomes.failures(other.id!))[0]).toBeInstanceOf(IdempotencyKeyMismatchError);
      gate.resolve();
      expect(await app.finished(first)).toBe('ran');
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    });

    it("fingerprint: ['amount'] compares that field only", async () => {
      const { app, outcomes } = await boot({
        idempotency: { key: byOrder, fingerprint: ['amount'] },
        handler: async (job) => `ran:${(job.data as Order).note}`,
      });
      const first = await app.queue.add('charge', { orderId: 'o-6', amount: 10, note: 'first' });
      expect(await app.finished(first)).toBe('ran:first');
      const noteChanged = await app.queue.add('charge', { orderId: 'o-6', amount: 10, note: 'second' });
      expect(await app.finished(noteChanged)).toBe('ran:first');
      const amountChanged = await app.queue.add(
        'charge',
        { orderId: 'o-6', amount: 11, note: 'first' },
        { attempts: 3 },
      );
      expect((await outcomes.failures(amountChanged.id!))[0]).toBeInstanceOf(IdempotencyKeyMismatchError);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    });

    it('fingerprint: false compares nothing', async () => {
      const { app, store, scope } = await boot({
        idempotency: { key: byOrder, fingerprint: false },
        handler: async (job) => (job.data as Order).amount,
      });
      const first = await app.queue.add('charge', { orderId: 'o-7', amount: 10 });
      expect(await app.finished(first)).toBe(10);
      const other = await app.queue.add('charge', { orderId: 'o-7', amount: 99, note: 'anything' });
      expect(await app.finished(other)).toBe(10);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect((await store.get(scope('charge'), 'o-7'))?.fingerprint).toBeUndefined();
    });
  });

  describe('missing key', () => {
    const kinds: Record<string, () => unknown> = {
      undefined: () => undefined,
      null: () => null,
      empty: () => '',
      NaN: () => NaN,
      infinity: () => Infinity,
      object: () => ({ id: 'o-8' }),
      array: () => ['o-8'],
      throws: () => {
        throw new Error('no key in this payload');
      },
      // A key function that throws something without a message (once a TypeError out of the library).
      throwsNull: () => {
        throw null; // eslint-disable-line @typescript-eslint/only-throw-error
      },
      throwsBare: () => {
        throw Object.create(null) as object; // eslint-disable-line @typescript-eslint/only-throw-error
      },
    };
    const keyOfKind = (job: IdempotencyJob<{ kind: string }>) => kinds[job.data.kind]() as string;

    it('undefined, null, empty, NaN, an object or a throwing key function: MissingIdempotencyKeyError, unrecoverable', async () => {
      const { app, events, outcomes } = await boot({ idempotency: { key: keyOfKind }, handler: async () => 'ran' });
      const described: Record<string, RegExp> = {
        undefined: /undefined/,
        null: /null/,
        empty: /an empty string/,
        NaN: /NaN/,
        infinity: /Infinity/,
        object: /object/,
        array: /array/,
        throws: /an error \(no key in this payload\)/,
        throwsNull: /an error \(null\)/,
        throwsBare: /an error \(a thrown object without a string form\)/,
      };
      for (const kind of Object.keys(kinds)) {
        const job = await app.queue.add('charge', { kind }, { attempts: 3 });
        const [error] = await outcomes.failures(job.id!);
        expect(error).toBeInstanceOf(MissingIdempotencyKeyError);
        expect(error).toBeInstanceOf(UnrecoverableError);
        expect(error).toBeInstanceOf(UniqueJobsError);
        expect((error as MissingIdempotencyKeyError).got).toMatch(described[kind]);
        await expect(app.finished(job)).rejects.toThrow(/has no idempotency key: the key function returned/);
        expect(await app.queue.getJobState(job.id!)).toBe('failed');
        expect((await jobOf(app, job)).attemptsMade).toBe(1);
      }
      expect(app.runs).toEqual([]);
      expect(events.of('idempotencyMissingKey')).toHaveLength(Object.keys(kinds).length);
      expect(events.of('idempotencyMissingKey').every((event) => event.action === 'failed')).toBe(true);
      // The event, and so its warning line, says what the key function returned (the line said only "failed").
      for (const [i, kind] of Object.keys(kinds).entries()) {
        const event = events.of('idempotencyMissingKey')[i];
        expect(event.got).toMatch(described[kind]);
        expect(describeEvent(event)).toMatch(/has no idempotency key \(the key function returned .+\): failed$/);
      }
      expect(await keysOf(app)).toEqual([]);
    });

    it('the message says what the key function returned, in plain words', async () => {
      const { app, outcomes } = await boot({ idempotency: { key: keyOfKind }, handler: async () => 'ran' });
      const messages: Record<string, string> = {};
      for (const kind of ['undefined', 'object', 'array']) {
        const job = await app.queue.add('charge', { kind });
        messages[kind] = (await outcomes.failures(job.id!))[0].message;
      }
      // Regression: these read "returned a undefined" and "returned a object".
      expect(messages.undefined).toContain('the key function returned undefined;');
      expect(messages.object).toContain('the key function returned an object;');
      expect(messages.array).toContain('the key function returned an array;');
    });

    it("onMissingKey: 'run' runs the handler unguarded, with a warning; idempotencyOf(job) throws", async () => {
      const { logger, lines } = captureLogger();
      const seen: { thrown: unknown; current: unknown }[] = [];
      const { app, events } = await boot({
        idempotency: { key: keyOfKind, onMissingKey: 'run' },
        module: { logger },
        handler: async (job) => {
          seen.push({ thrown: thrownBy(() => idempotencyOf(job)), current: currentIdempotency() });
          return 'ran unguarded';
        },
      });
      for (const kind of ['undefined', 'undefined']) {
        expect(await app.finished(await app.queue.add('charge', { kind }))).toBe('ran unguarded');
      }
      expect(app.runs).toHaveLength(2);
      expect(seen).toHaveLength(2);
      for (const { thrown, current } of seen) {
        expect(thrown).toBeInstanceOf(UniqueJobsError);
        expect((thrown as Error).message).toContain('not running under @IdempotencyKey');
        expect(current).toBeUndefined();
      }
      expect(events.of('idempotencyMissingKey').map((event) => event.action)).toEqual(['ran', 'ran']);
      expect(lines.warn.filter((line) => line.includes('without idempotency'))).toEqual([
        expect.stringMatching(/has no idempotency key \(the key function returned undefined\): running it without/),
        expect.stringMatching(/has no idempotency key \(the key function returned undefined\): running it without/),
      ]);
      expect(await keysOf(app)).toEqual([]);
    });
  });

  describe('a result that cannot be stored as JSON', () => {
    it.each<[string, 'release' | 'keep', () => unknown]>([
      ['a BigInt', 'release', () => ({ total: 10n })],
      [
        'a circular structure',
        'keep',
        () => {
          const node: Record<string, unknown> = { id: 1 };
          node.self = node;
          return node;
        },
      ],
    ])(
      '%s (onFailure %s): UnserializableIdempotencyResultError, no retries, the key kept failed (its effect ran)',
      async (_l, onFailure, make) => {
        const { app, events, outcomes, store, scope } = await boot({
          idempotency: { key: byOrder, onFailure },
          handler: async () => make(),
        });
        const job = await app.queue.add('charge', { orderId: 'o-json', amount: 1 }, { attempts: 3 });
        const [error] = await outcomes.failures(job.id!);
        expect(error).toBeInstanceOf(UnserializableIdempotencyResultError);
        expect(error).toBeInstanceOf(UnrecoverableError);
        expect(error).toMatchObject({ key: 'o-json', scope: scope('charge') });
        // It names the offending value of the result, not "lock arguments" (the serializer's other use).
        expect(error.message).not.toMatch(/lock arguments/i);
        expect(error.message).toMatch(/cannot be stored as JSON: .* \(at \$\.(total|self)\)$/);
        await expect(app.finished(job)).rejects.toThrow(/"o-json".*cannot be stored as JSON/);
        expect(await app.queue.getJobState(job.id!)).toBe('failed');
        expect((await jobOf(app, job)).attemptsMade).toBe(1);
        expect(app.runs).toHaveLength(1);
        // The handler's effect has run (plain mode): released, the key would let the next delivery run it again.
        expect(await store.get(scope('charge'), 'o-json')).toMatchObject({
          state: 'failed',
          error: expect.stringContaining('cannot be stored as JSON'),
        });
        expect(events.of('idempotencyFailureKept')).toEqual([expect.objectContaining({ jobId: job.id })]);
        expect(events.of('idempotencyReleased')).toEqual([]);
        expect(events.of('idempotencyCompleted')).toEqual([]);
        const again = await app.queue.add('charge', { orderId: 'o-json', amount: 1 });
        expect((await outcomes.failures(again.id!))[0]).toBeInstanceOf(IdempotencyKeyFailedError);
        expect(app.runs).toHaveLength(1);
      },
    );
  });

  describe('keys and scopes', () => {
    it("a number key 42 and the string '42' are one key", async () => {
      const { app, events, store, scope } = await boot({
        idempotency: {
          key: (job: IdempotencyJob<{ ref: string | number; amount: number }>) => job.data.ref,
          fingerprint: ['amount'],
        },
        handler: async (job) => ({ ref: (job.data as { ref: unknown }).ref }),
      });
      const first = await app.queue.add('charge', { ref: 42, amount: 1 });
      expect(await app.finished(first)).toEqual({ ref: 42 });
      const second = await app.queue.add('charge', { ref: '42', amount: 1 });
      expect(await app.finished(second)).toEqual({ ref: 42 });
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(events.of('idempotencyReplayed')).toEqual([expect.objectContaining({ jobId: second.id, key: '42' })]);
      expect(await store.get(scope('charge'), '42')).toMatchObject({ state: 'completed', key: '42' });
    });

    it('a 1,000-character key is stored as sha256:<hex>; keys sharing their first 255 characters stay distinct', async () => {
      let effects = 0;
      const { app, events, store, scope } = await boot({
        idempotency: { key: byOrder, fingerprint: false },
        handler: async (job) => {
          effects++;
          return (job.data as Order).orderId.length;
        },
      });
      const long = `L${'x'.repeat(999)}`;
      const shared = 'p'.repeat(255);
      const atLimit = 'q'.repeat(255);
      for (const key of [long, `${shared}-a`, `${shared}-b`, atLimit]) {
        expect(await app.finished(await app.queue.add('charge', { orderId: key, amount: 1 }))).toBe(key.length);
      }
      expect(effects).toBe(4);
      expect(await app.finished(await app.queue.add('charge', { orderId: long, amount: 1 }))).toBe(1000);
      expect(effects).toBe(4);

      const claimedKeys = events.of('idempotencyClaimed').map((event) => event.key);
      expect(claimedKeys).toEqual([sha256Key(long), sha256Key(`${shared}-a`), sha256Key(`${shared}-b`), atLimit]);
      const record = await store.get(scope('charge'), sha256Key(long));
      expect(record).toMatchObject({ state: 'completed', key: sha256Key(long) });
      expect(record!.key).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(await store.get(scope('charge'), long)).toBeUndefined();
      expect(await store.get(scope('charge'), atLimit)).toMatchObject({ state: 'completed', key: atLimit });
      expect(events.of('idempotencyReplayed')).toEqual([expect.objectContaining({ key: sha256Key(long) })]);
    });

    it("the scope defaults to '<queue>:<job name>': one key under two job names is two effects", async () => {
      const { app, store, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async (job) => `${job.name}:${(job.data as Order).orderId}`,
      });
      const data: Order = { orderId: 'o-9', amount: 3 };
      expect(await app.finished(await app.queue.add('charge', data))).toBe('charge:o-9');
      expect(await app.finished(await app.queue.add('refund', data))).toBe('refund:o-9');
      expect(app.runs.map((job) => job.name)).toEqual(['charge', 'refund']);
      expect(await store.get(scope('charge'), 'o-9')).toMatchObject({ state: 'completed', scope: scope('charge') });
      expect(await store.get(scope('refund'), 'o-9')).toMatchObject({ state: 'completed', scope: scope('refund') });
    });

    it('an explicit scope shared by two job names (and two queues) makes them one', async () => {
      const prefix = uniqueName('ujt');
      const shared = uniqueName('payments');
      const options: Partial<TestAppOptions> = {
        idempotency: { key: byOrder, scope: shared },
        module: { prefix },
        handler: async (job) => `${job.queueName}/${job.name}`,
      };
      const { app, events, store } = await boot(options);
      const other = await start(options);
      const data: Order = { orderId: 'o-10', amount: 3 };
      const first = await app.queue.add('charge', data);
      expect(await app.finished(first)).toBe(`${app.queue.name}/charge`);
      expect(await app.finished(await app.queue.add('capture', data))).toBe(`${app.queue.name}/charge`);
      expect(await other.finished(await other.queue.add('settle', data))).toBe(`${app.queue.name}/charge`);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(other.runs).toEqual([]);
      expect(events.of('idempotencyReplayed')).toEqual([
        expect.objectContaining({ jobName: 'capture', scope: shared }),
      ]);
      expect(await store.get(shared, 'o-10')).toMatchObject({ state: 'completed', jobId: first.id });
    });

    it('per job name: each name has its own key function; a name without options runs unguarded', async () => {
      const byRefund = (job: IdempotencyJob<{ refundId: string }>) => job.data.refundId;
      const { app, events } = await boot({
        idempotency: [
          { key: byOrder, jobName: 'charge' },
          { key: byRefund, jobName: ['refund', 'partial-refund'] },
        ],
        handler: async (job) => job.name,
      });
      for (const [name, data] of [
        ['charge', { orderId: 'o-11', amount: 1 }],
        ['charge', { orderId: 'o-11', amount: 1 }],
        ['refund', { refundId: 'r-1' }],
        ['refund', { refundId: 'r-1' }],
        ['ping', { orderId: 'o-11' }],
        ['ping', { orderId: 'o-11' }],
      ] as const) {
        await app.finished(await app.queue.add(name, data));
      }
      expect(app.runs.map((job) => job.name)).toEqual(['charge', 'refund', 'ping', 'ping']);
      expect(events.of('idempotencyReplayed').map((event) => [event.jobName, event.key])).toEqual([
        ['charge', 'o-11'],
        ['refund', 'r-1'],
      ]);
    });
  });

  describe('the context', () => {
    it('idempotencyOf(job) and currentIdempotency() give scope, key and a stable downstream key', async () => {
      interface Seen {
        jobId: string | undefined;
        attempt: number;
        scope: string;
        key: string;
        takeover: boolean;
        transaction: unknown;
        charge: string;
        refund: string;
        bare: string;
        nestedIsSame: boolean;
        nestedCharge: string | undefined;
        destructured: string;
      }
      const seen: Seen[] = [];
      const fromService = async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return currentIdempotency();
      };
      const { app, scope } = await boot({
        idempotency: { key: byOrder },
        handler: async (job) => {
          const context = idempotencyOf(job);
          const nested = await fromService();
          seen.push({
            jobId: job.id,
            attempt: job.attemptsMade,
            scope: context.scope,
            key: context.key,
            takeover: context.takeover,
            transaction: context.transaction,
            charge: context.downstreamKey('charge'),
            refund: context.downstreamKey('refund'),
            bare: context.downstreamKey(),
            nestedIsSame: nested === context,
            nestedCharge: nested?.downstreamKey('charge'),
            destructured: (({ downstreamKey }) => downstreamKey('charge'))(context),
          });
          if (job.attemptsMade === 0 && (job.data as Order).note === 'fail-first') throw new Error('provider timeout');
          return context.downstreamKey('charge');
        },
      });
      const first = await app.queue.add(
        'charge',
        { orderId: 'order-48213', amount: 5, note: 'fail-first' },
        { attempts: 2 },
      );
      const firstKey = await app.finished(first);
      expect(seen).toHaveLength(2);
      const [attempt1, attempt2] = seen;
      for (const entry of seen) {
        expect(entry).toMatchObject({
          jobId: first.id,
          scope: scope('charge'),
          key: 'order-48213',
          takeover: false,
          transaction: undefined,
          nestedIsSame: true,
        });
        expect(entry.charge).toMatch(/^uj_[A-Za-z0-9_-]{43}$/);
        expect(entry.nestedCharge).toBe(entry.charge);
        expect(entry.destructured).toBe(entry.charge);
        for (const downstream of [entry.charge, entry.refund, entry.bare]) {
          expect(downstream).not.toContain('48213');
          expect(downstream).not.toContain('order');
        }
        expect(new Set([entry.charge, entry.refund, entry.bare]).size).toBe(3);
      }
      expect([attempt1.attempt, attempt2.attempt]).toEqual([0, 1]);
      expect(attempt2.charge).toBe(attempt1.charge);
      expect(attempt2.refund).toBe(attempt1.refund);
      expect(firstKey).toBe(attempt1.charge);

      // A later delivery of the key replays the same downstream key without running.
      expect(await app.finished(await app.queue.add('charge', first.data))).toBe(attempt1.charge);
      expect(seen).toHaveLength(2);

      // Another key, or the same key under another scope: another downstream key.
      expect(await app.finished(await app.queue.add('charge', { orderId: 'order-48214', amount: 5 }))).not.toBe(
        attempt1.charge,
      );
      expect(await app.finished(await app.queue.add('refund', { orderId: 'order-48213', amount: 5 }))).not.toBe(
        attempt1.charge,
      );
      expect(new Set(seen.map((entry) => entry.charge)).size).toBe(3);
      expect(currentIdempotency()).toBeUndefined();
    });
  });

  describe('with @UniqueJob', () => {
    it('until_executed + @IdempotencyKey: one effect, and no lock keys left at the end', async () => {
      const gate = hold();
      const started = hold();
      let effects = 0;
      const { app, store, scope } = await boot({
        unique: { lock: 'until_executed', lockArgs: (data: Order) => data.orderId },
        idempotency: { key: byOrder },
        handler: async () => {
          effects++;
          if (effects === 1) {
            started.resolve();
            await gate.promise;
          }
          return 'charged';
        },
      });
      const data: Order = { orderId: 'o-12', amount: 4 };
      const recordKey = store.recordKey(scope('charge'), 'o-12');
      const first = await app.queue.add('charge', data);
      await started.promise;
      // The lock keeps the duplicate out of the queue while the first runs.
      expect(await app.service.enqueue(app.queue, 'charge', data)).toMatchObject({
        status: 'duplicate',
        existingJobId: first.id,
      });
      expect(await keysOf(app)).toContain(recordKey);
      gate.resolve();
      expect(await app.finished(first)).toBe('charged');
      // Only the idempotency record remains under the prefix: the lock is gone.
      expect(await keysOf(app)).toEqual([recordKey]);

      // Once the lock is released a new job is accepted, and the key replays it.
      const second = await app.queue.add('charge', data);
      expect(second.id).not.toBe(first.id);
      expect(await app.finished(second)).toBe('charged');
      expect(effects).toBe(1);
      expect(app.runs.map((job) => job.id)).toEqual([first.id]);
      expect(await keysOf(app)).toEqual([recordKey]);
    });
  });

  describe('the store', () => {
    it('an unreachable store fails the attempt (BullMQ retries) and the handler never runs unclaimed', async () => {
      const port = await closedPort();
      const client = new Redis({
        host: '127.0.0.1',
        port,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        retryStrategy: () => null,
        lazyConnect: true,
      });
      client.on('error', () => undefined);
      // Disconnecting a client that already gave up would leave ioredis's 2 s disconnect timer behind.
      onCleanup(async () => {
        if (client.status !== 'end') client.disconnect();
      });
      const prefix = uniqueName('ujt');
      const { app, events, outcomes } = await boot({
        module: { prefix, idempotency: { store: new RedisIdempotencyStore({ client, prefix }) } },
        idempotency: { key: byOrder },
        handler: async () => 'must not run',
      });
      const job = await app.queue.add('charge', { orderId: 'o-13', amount: 1 }, { attempts: 3 });
      await expect(app.finished(job)).rejects.toThrow();
      const errors = await outcomes.failures(job.id!, 3);
      expect(errors).toHaveLength(3);
      for (const error of errors) {
        expect(error).not.toBeInstanceOf(UnrecoverableError);
        expect(error.message).toMatch(/Connection is closed|enableOfflineQueue|ECONNREFUSED/);
      }
      expect(await app.queue.getJobState(job.id!)).toBe('failed');
      expect((await jobOf(app, job)).attemptsMade).toBe(3);
      expect(app.runs).toEqual([]);
      expect(events.of('idempotencyClaimed')).toEqual([]);
    });

    it('a store unreachable at completion: the attempt fails, the claim stays, and the retry takes it over after its lease', async () => {
      const client = redisClient({ maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
      client.on('error', () => undefined);
      onCleanup(async () => {
        if (client.status !== 'end') client.disconnect();
      });
      await client.connect();
      const gate = hold();
      const started = hold();
      const prefix = uniqueName('ujt');
      const takeovers: boolean[] = [];
      let effects = 0;
      const { app, outcomes, store, scope } = await boot({
        module: { prefix, idempotency: { store: new RedisIdempotencyStore({ client, prefix }) } },
        idempotency: { key: byOrder, lease: 2_000 },
        handler: async (job) => {
          effects++;
          takeovers.push(idempotencyOf(job).takeover);
          if (effects === 1) {
            started.resolve();
            await gate.promise;
          }
          return `effect ${effects}`;
        },
      });
      const job = await app.queue.add(
        'charge',
        { orderId: 'o-lost-completion', amount: 1 },
        { attempts: 5, backoff: { type: 'fixed', delay: 500 } },
      );
      await started.promise;
      const ended = once(client, 'end');
      client.disconnect();
      await ended;
      gate.resolve();
      const [error] = await outcomes.failures(job.id!);
      expect(error.message).toMatch(/Connection is closed|enableOfflineQueue/);
      await client.connect();
      // The effect happened but was not recorded: the retry waits for the claim's lease to end, then runs it again, as a
      // takeover (docs: "Failures of the store itself").
      expect(await app.finished(job)).toBe('effect 2');
      expect(takeovers).toEqual([false, true]);
      expect(await store.get(scope('charge'), 'o-lost-completion')).toMatchObject({ state: 'completed', attempts: 2 });
    });

    it('records live under the module prefix, with no raw key in their name, and always a TTL', async () => {
      const gate = hold();
      const started = hold();
      const raw = `evt_${randomUUID()}`;
      const { app, store, scope } = await boot({
        idempotency: { key: byOrder, ttl: 60_000, lease: 4_000 },
        handler: async (job) => {
          if ((job.data as Order).orderId === raw) {
            started.resolve();
            await gate.promise;
          }
          return 'done';
        },
      });
      const first = await app.queue.add('charge', { orderId: raw, amount: 1 });
      await started.promise;
      const recordKey = store.recordKey(scope('charge'), raw);
      expect(await prefixKeys(redis, app.prefix)).toEqual([recordKey]);
      expect(recordKey.startsWith(`${app.prefix}:{`)).toBe(true);
      expect(recordKey).toMatch(/:\{[A-Za-z0-9_-]{43}\}:idempotency$/);
      expect(recordKey).not.toContain(raw);
      expect(await scanKeys(redis, `*${raw}*`)).toEqual([]);
      // In progress: a TTL too, bounded by the lease plus the time an expired claim is kept (docs: ten minutes).
      const leaseTtl = await redis.pttl(recordKey);
      expect(leaseTtl).toBeGreaterThan(0);
      expect(leaseTtl).toBeLessThanOrEqual(4_000 + 10 * 60_000);

      gate.resolve();
      await app.finished(first);
      const other = `evt_${randomUUID()}`;
      await app.finished(await app.queue.add('charge', { orderId: other, amount: 1 }));
      const keys = await prefixKeys(redis, app.prefix);
      expect(keys).toEqual([recordKey, store.recordKey(scope('charge'), other)].sort());
      expect(await scanKeys(redis, `*${raw}*`)).toEqual([]);
      expect(await scanKeys(redis, `*${other}*`)).toEqual([]);
      for (const key of keys) {
        const ttl = await redis.pttl(key);
        expect(ttl).toBeGreaterThan(50_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
      }
    });

    it('the module-wide default ttl applies to records of options that set none', async () => {
      const { app, store, scope } = await boot({
        module: { idempotency: { defaults: { ttl: 45_000 } } },
        idempotency: { key: byOrder },
        handler: async () => 'done',
      });
      await app.finished(await app.queue.add('charge', { orderId: 'o-14', amount: 1 }));
      const ttl = await redis.pttl(store.recordKey(scope('charge'), 'o-14'));
      expect(ttl).toBeGreaterThan(35_000);
      expect(ttl).toBeLessThanOrEqual(45_000);
      const record: IdempotencyRecord | undefined = await store.get(scope('charge'), 'o-14');
      expect(record!.expiresAt - Date.now()).toBeLessThanOrEqual(45_000 + 1_000);
    });
  });

  it('enabled: false turns idempotency off: the handler runs every time, nothing is stored', async () => {
    const contexts: unknown[] = [];
    const { app, events } = await boot({
      module: { enabled: false },
      idempotency: { key: byOrder },
      handler: async (job) => {
        contexts.push(thrownBy(() => idempotencyOf(job)));
        return 'ran';
      },
    });
    const data: Order = { orderId: 'o-15', amount: 1 };
    for (let i = 0; i < 3; i++) expect(await app.finished(await app.queue.add('charge', data))).toBe('ran');
    expect(app.runs).toHaveLength(3);
    for (const thrown of contexts) expect(thrown).toBeInstanceOf(UniqueJobsError);
    expect(await scanKeys(redis, `${app.prefix}:*`)).toEqual([]);
    expect(events.events).toEqual([]);
  });
});
